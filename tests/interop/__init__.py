"""The interop tier: tests against real servers (see conftest.py)."""
