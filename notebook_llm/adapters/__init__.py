"""Adapters: what turns a request into a provider's HTTP exchange and its answer into protocol
events. :mod:`.base` is the Python interface, :mod:`.lua` runs HomeAgent-contract Lua scripts
in a sandbox, :mod:`.mock` is the offline mock (a loopback server and direct models).

Adapters import :mod:`notebook_llm.core` and :mod:`notebook_llm.wire`, never the engine, the
API or the notebook layer.
"""
