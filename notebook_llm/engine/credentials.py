"""Where a provider's API key comes from, and what to tell the user when there is none.

One job, for one engine: find the key of a provider without ever showing it. The order is

1. a key set for this session (``engine.set_key``, ``%llm key``), kept as a
   :class:`~notebook_llm.core.redaction.Secret`;
2. a key given with the provider's settings (``add_provider(api_key=...)``);
3. the provider's environment variable (``api_key_env``), then the same name in a ``.env``
   file, which is read once and never copied into ``os.environ``.

Every key is handed to the scrubber (:func:`~notebook_llm.core.redaction.register_secret`) as soon as
it is known, even before a request reads it, so a key echoed into a prompt or an output is
hidden. A missing key gets one hint that names the variable, never a value. A replaying
engine (it knows it is) asks with ``replaying=True`` and gets a placeholder: replay sends
nothing out.
"""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from ..core.errors import ErrorCode, LlmError
from ..core.redaction import Secret, register_secret
from .providers import FileConfig, ProviderConfig, notice


class Credentials:
    """The keys of one engine: session keys, provider keys, the environment and a ``.env``."""

    def __init__(self, env_file: Path | str | bool | None = None) -> None:
        """``env_file``: the ``.env`` to read (``None``: ``./.env``; ``False``: none)."""
        self._session_keys: dict[str, Secret] = {}
        self._env_file: dict[str, str] = {}
        if env_file is not False:
            self._env_file = read_env_file(
                Path(env_file) if isinstance(env_file, str | Path) else Path(".env")
            )

    def register_known(self, file_config: FileConfig, declared: Iterable[ProviderConfig]) -> None:
        """Tell the scrubber about every key the environment holds for a known provider (one
        ``declared`` by a plugin, or in the config file), before any is used: a key echoed into
        a prompt or an output is hidden even if no request has read it yet."""
        names = {p.api_key_env for p in declared}
        names |= {t.get("api_key_env") for t in file_config.providers.values()}
        for var in names:
            if var:
                register_secret(os.environ.get(var))

    def set(self, provider: str, key: str) -> None:
        """Use ``key`` for ``provider`` for this session only (kept in memory, never shown)."""
        if not key:
            raise LlmError("an empty key", ErrorCode.MISSING_CREDENTIAL, provider=provider)
        self._session_keys[provider] = Secret(key)

    def given_in_session(self, provider: str) -> bool:
        """Whether ``provider``'s key was given in this session (:meth:`set`), not read from a
        variable: such a key cannot be found again by another process."""
        return provider in self._session_keys

    def key_for(self, config: ProviderConfig) -> str | None:
        """The key for the provider ``config`` describes, or ``None`` (see the module order)."""
        if config.name in self._session_keys:
            return self._session_keys[config.name].get()
        if config.api_key is not None:
            return config.api_key.get()
        if config.api_key_env:
            value = os.environ.get(config.api_key_env) or self._env_file.get(config.api_key_env)
            if value:
                register_secret(value)
                return value
        return None

    def require(self, config: ProviderConfig, *, replaying: bool = False) -> str | None:
        """The key a request sends: :meth:`key_for`, the replay placeholder when replaying, or
        ``None`` for a provider that needs none; ``MISSING_CREDENTIAL`` (with the hint) else."""
        api_key = self.key_for(config)
        if api_key is not None or not config.needs_key:
            return api_key
        if replaying:
            from ..wire.cassette import REPLAY_KEY

            return REPLAY_KEY
        raise LlmError(
            f"no API key for provider {config.name!r}: {key_hint(config.name, config)}",
            ErrorCode.MISSING_CREDENTIAL,
            provider=config.name,
            details={"variable": config.api_key_env},
        )


def key_hint(provider: str, config: ProviderConfig) -> str:
    """What to do to give ``provider`` a key (names the variable, never shows a value)."""
    var = config.api_key_env or f"{provider.upper()}_API_KEY"
    return (
        f"set the environment variable {var} (or put {var}=... in a .env file), "
        f"or run %llm key {provider}"
    )


#: The largest ``.env`` read: a few keys fit in a few hundred bytes.
MAX_ENV_BYTES = 1024 * 1024


def read_env_file(path: Path) -> dict[str, str]:
    """Keys from a ``.env`` file, without putting them into ``os.environ``.

    A file that cannot be used (unreadable, not UTF-8, huge) is one line on stderr and no keys;
    lines python-dotenv cannot parse are counted in one line, not warned about one by one.
    """
    try:
        if not path.is_file():
            return {}
        from dotenv import dotenv_values
    except ImportError:  # pragma: no cover - python-dotenv is a dependency
        return {}
    except OSError:
        return {}
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_ENV_BYTES + 1)
        if len(raw) > MAX_ENV_BYTES:
            notice(f"{path} is more than {MAX_ENV_BYTES:,} bytes: not a .env file; it is ignored")
            return {}
        text = raw.decode("utf-8-sig")
        skipped = _Skipped()
        dotenv_log = logging.getLogger("dotenv.main")
        dotenv_log.addFilter(skipped)
        try:
            parsed = dotenv_values(stream=io.StringIO(text))
        finally:
            dotenv_log.removeFilter(skipped)
    except UnicodeDecodeError as exc:
        notice(f"{path} is not UTF-8 text (byte {exc.start}): it is ignored; save it as UTF-8")
        return {}
    except Exception as exc:  # any other fault of the file: one line, never a traceback
        notice(f"cannot read {path} ({type(exc).__name__}): it is ignored")
        return {}
    if skipped.lines:
        where = ", ".join(str(n) for n in skipped.lines[:5])
        notice(f"{path}: {len(skipped.lines)} line(s) could not be read (line {where}); skipped")
    values = {k: v for k, v in parsed.items() if v}
    for value in values.values():
        register_secret(value)
    return values


class _Skipped(logging.Filter):
    """Swallows python-dotenv's one warning per unparsable line, keeping the line numbers."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[int] = []

    def filter(self, record: logging.LogRecord) -> bool:
        number = record.args[-1] if isinstance(record.args, tuple) and record.args else None
        self.lines.append(number if isinstance(number, int) else 0)
        return False
