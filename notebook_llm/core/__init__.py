"""The ground floor: the stream protocol, errors, redaction, cancellation, the completion a
stream folds into, and the stream rules.

Everything above builds on these; nothing here imports another layer of the package (the
import-rule test in ``tests/test_architecture.py`` holds it to that).
"""
