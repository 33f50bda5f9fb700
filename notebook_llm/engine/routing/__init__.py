"""Which adapter answers a name.

A provider name resolves in this order: the :mod:`.registry` (routes bound by plugins and the
session) -> the :mod:`.catalog` (adapters by name: loaded in the session, registered, or found
by a resolver) -> :mod:`.lua_files` (a user's ``*.lua``, a plugin's adapter, a shipped script).
:mod:`.plugins` installs what every engine knows at start, :mod:`.builtin_plugin` being the
first plugin: the shipped Lua adapters and the offline mock.
"""
