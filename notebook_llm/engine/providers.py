"""Providers as data: a route name bound to an adapter plus connection settings.

A provider is declared once, as one :class:`ProviderConfig`: its adapter, base URL, key
variable, default model, models, prices and what its API can do (``max_tokens_field``,
``lists_models``, ``needs_key``). Plugins declare them (``host.declare_provider``, see
:mod:`notebook_llm.engine.routing.plugins`); the built-in ones are the built-in plugin's
(:data:`notebook_llm.engine.routing.builtin_plugin.PROVIDERS`). Each can be overridden, and new
providers added, from the config file (``<user config dir>/notebook_llm/config.toml``, or the file named by
``NOTEBOOK_LLM_CONFIG``) and from the environment (``NOTEBOOK_LLM_<NAME>_BASE_URL``,
``NOTEBOOK_LLM_<NAME>_MODEL``). Keys are never written in the config file: it names the
environment variable that holds the key (``api_key_env``).

Example ``config.toml``::

    [defaults]
    provider = "openai"
    model = "gpt-4o-mini"
    tool_timeout = 60               # optional: seconds one tool call may run

    [providers.openai]
    model = "gpt-4.1-mini"

    [providers.local-vllm]          # any OpenAI-compatible server, no code needed
    adapter = "openai"
    base_url = "http://127.0.0.1:8000/v1"
    model = "qwen2.5-7b"
    api_key_env = "VLLM_KEY"        # optional
    max_tokens_field = "max_tokens" # optional: the body field for max_tokens

The ``openai`` adapter sends ``max_tokens``, which OpenAI-compatible servers (llama.cpp, vLLM,
Ollama, LM Studio) read; the ``openai`` provider sets ``max_tokens_field =
"max_completion_tokens"`` because OpenAI's own API refuses ``max_tokens`` for its reasoning
models.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import platformdirs

from ..core.errors import ErrorCode, LlmError
from ..core.redaction import Secret


@dataclass
class ProviderConfig:
    """Connection settings of one provider route."""

    name: str
    adapter: str
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    api_key: Secret | None = None
    headers: dict[str, str] = field(default_factory=dict)
    extra_body: dict[str, Any] = field(default_factory=dict)
    #: Whether requests need a key (a local server does not).
    needs_key: bool = True
    #: Models shown by ``%llm models`` when the adapter cannot list them.
    models: list[str] = field(default_factory=list)
    #: Price per million tokens, (input, output), by model; used for cost in the live view.
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: Where this configuration came from: "built-in", a plugin's name, "config file", "code".
    source: str = "code"
    #: The body field that carries max_tokens (``max_tokens`` / ``max_completion_tokens``);
    #: ``None`` keeps the adapter's choice.
    max_tokens_field: str | None = None
    #: Whether the server lists its models at ``GET {base_url}/models`` in OpenAI's shape
    #: (llama.cpp, vLLM, LM Studio do); ``None``: when its adapter is ``openai``. A provider
    #: whose list is long and mostly not chat models says ``False`` and lists ``models``.
    lists_models: bool | None = None

    def serves_model_list(self) -> bool:
        """Whether ``%llm models`` asks the server (see :attr:`lists_models`)."""
        if self.lists_models is not None:
            return self.lists_models
        return self.adapter == "openai"


def config_path() -> Path:
    """The config file: ``$NOTEBOOK_LLM_CONFIG`` or ``<user config dir>/notebook_llm/config.toml``."""
    env = os.environ.get("NOTEBOOK_LLM_CONFIG")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_config_dir("notebook_llm")) / "config.toml"


def user_adapters_dir() -> Path:
    """Folder of user ``*.lua`` adapters: ``$NOTEBOOK_LLM_ADAPTERS_DIR`` or the config dir's ``adapters/``."""
    env = os.environ.get("NOTEBOOK_LLM_ADAPTERS_DIR")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_config_dir("notebook_llm")) / "adapters"


@dataclass
class FileConfig:
    default_provider: str | None = None
    default_model: str | None = None
    #: ``[defaults] tool_timeout``: seconds one tool call may run in a tool loop (``%%llm
    #: --tools``, ``Chat``, ``run_tools``, ``map(tools=)``) that gives none; ``None``: no limit.
    default_tool_timeout: float | None = None
    providers: dict[str, dict[str, Any]] = field(default_factory=dict)
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)


_ALLOWED_KEYS = {
    "adapter",
    "base_url",
    "model",
    "api_key_env",
    "headers",
    "extra_body",
    "models",
    "needs_key",
    "prices",
    "max_tokens_field",
    "lists_models",
}


#: What each provider key must hold (checked when the file is read, so a wrong type is one
#: line naming the key and the provider, not a failure deep in an adapter or a formatter).
_KEY_TYPES: dict[str, Any] = {
    "adapter": str,
    "base_url": str,
    "model": str,
    "api_key_env": str,
    "needs_key": bool,
    "lists_models": bool,
    "headers": "string table",
    "models": "string list",
    "prices": "price table",
}

_TYPE_WORDS = {
    str: "a string (in quotes)",
    bool: "true or false",
    "string table": "a table of strings",
    "string list": "a list of strings",
    "price table": 'a table of [input, output] prices per million tokens, e.g. "m" = [0.15, 0.6]',
    "price": "a list [input, output] of two prices per million tokens, e.g. [0.15, 0.6]",
}


def _type_ok(value: Any, want: Any) -> bool:
    if want is str:
        return isinstance(value, str)
    if want is bool:
        return isinstance(value, bool)
    if want == "string table":
        return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    if want == "string list":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if want == "price":
        return (
            isinstance(value, list)
            and len(value) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
        )
    if want == "price table":
        return isinstance(value, dict) and all(_type_ok(v, "price") for v in value.values())
    return True  # extra_body: any JSON-like value


def _toml_kind(value: Any) -> str:
    kinds = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    for kind, word in kinds.items():
        if type(value) is kind:
            return f"{word} ({value!r})"
    return (
        "a table" if isinstance(value, dict) else "a list" if isinstance(value, list) else "a date"
    )


def _check_type(path: Path, section: str, key: str, value: Any, want: Any) -> None:
    if value is None or want is None or _type_ok(value, want):
        return
    raise LlmError(
        f"{path}: {section} {key} must be {_TYPE_WORDS[want]}, not {_toml_kind(value)}",
        ErrorCode.INVALID_OPTIONS,
    )


def price_problem(pair: Any) -> str | None:
    """Why ``pair`` is not a price (``None``: it is one): two numbers of US dollars per million
    tokens, each finite and not negative (a NaN compares false with every cap, a negative
    price lowers what is spent)."""
    if not isinstance(pair, list | tuple) or len(pair) != 2:
        return "a price is two numbers, [input, output] US dollars per million tokens"
    for value in pair:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"a price is a number, not {value!r}"
        if not math.isfinite(value) or value < 0:
            return f"a price must be a finite number, not negative: got {value!r}"
    return None


def _check_price(path: Path, section: str, model: str, pair: Any) -> None:
    """A price of the file that is NaN, infinite or negative is one line naming it."""
    problem = price_problem(pair)
    if problem is not None:
        raise LlmError(f"{path}: {section} {model}: {problem}", ErrorCode.INVALID_OPTIONS)


_noticed: set[str] = set()


def notice(line: str) -> None:
    """Tell the user one line on stderr, once per process (a setting that was ignored)."""
    if line not in _noticed:
        _noticed.add(line)
        print(f"notebook_llm: {line}", file=sys.stderr)


#: The largest config file read: a config is a few hundred bytes; a file this big is not one.
MAX_CONFIG_BYTES = 1024 * 1024


def load_file_config(path: Path | None = None) -> FileConfig:
    """Read the TOML config file (missing file = empty config; a broken one is a clear error).

    Whatever the file holds, the only exception is ``LlmError(INVALID_OPTIONS)`` with one line
    naming the file and what to fix (the session engine then ignores the file): a wrong type at
    any level, bytes that are not UTF-8 or not TOML, nesting too deep to read, a huge file.
    """
    named = path is None and bool(os.environ.get("NOTEBOOK_LLM_CONFIG"))
    path = path or config_path()
    try:
        if not path.is_file():
            if named:
                notice(
                    f"NOTEBOOK_LLM_CONFIG names {path}, which is not a file: no config file is used"
                )
            return FileConfig()
        return _load_file_config(path)
    except LlmError:
        raise
    except RecursionError:
        raise LlmError(
            f"config file {path} is nested too deeply to read; a config needs a few levels of "
            "tables at most",
            ErrorCode.INVALID_OPTIONS,
        ) from None
    except Exception as exc:  # any other fault of the file: one line, never a traceback
        raise LlmError(
            f"cannot read config file {path}: {type(exc).__name__}: {exc}",
            ErrorCode.INVALID_OPTIONS,
        ) from None


def _load_file_config(path: Path) -> FileConfig:
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise LlmError(
            f"config file {path} is {size:,} bytes, more than the {MAX_CONFIG_BYTES:,} a config "
            "file may have: is it the right file?",
            ErrorCode.INVALID_OPTIONS,
        )
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:  # grew meanwhile, or a size stat does not report
            raise LlmError(
                f"config file {path} is more than the {MAX_CONFIG_BYTES:,} bytes a config file "
                "may have: is it the right file?",
                ErrorCode.INVALID_OPTIONS,
            )
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise LlmError(
            f"config file {path} is not UTF-8 text (byte 0x{raw[exc.start]:02x} on line {line}): "
            "save it as UTF-8",
            ErrorCode.INVALID_OPTIONS,
        ) from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise LlmError(
            f"cannot read config file {path}: {exc}", ErrorCode.INVALID_OPTIONS
        ) from None
    defaults = data.get("defaults", {})
    for section, want in (("defaults", dict), ("prices", dict)):
        if not isinstance(data.get(section, {}), want):
            raise LlmError(f"{path}: [{section}] must be a table", ErrorCode.INVALID_OPTIONS)
    for key in ("provider", "model"):
        _check_type(path, "[defaults]", key, defaults.get(key), str)
    tool_timeout = defaults.get("tool_timeout")
    if tool_timeout is not None and (
        isinstance(tool_timeout, bool)
        or not isinstance(tool_timeout, int | float)
        or not math.isfinite(tool_timeout)
        or tool_timeout <= 0
    ):
        raise LlmError(
            f"{path}: [defaults] tool_timeout must be a positive number of seconds, not "
            f"{tool_timeout!r}",
            ErrorCode.INVALID_OPTIONS,
        )
    for model, pair in data.get("prices", {}).items():
        _check_type(path, "[prices]", model, pair, "price")
        _check_price(path, "[prices]", model, pair)
    providers = data.get("providers", {})
    if not isinstance(providers, dict):
        raise LlmError(f"{path}: [providers] must be a table", ErrorCode.INVALID_OPTIONS)
    for name, table in providers.items():
        if not isinstance(table, dict):
            raise LlmError(f"{path}: [providers.{name}] must be a table", ErrorCode.INVALID_OPTIONS)
        if "api_key" in table:
            raise LlmError(
                f"{path}: [providers.{name}] has api_key; put the key in an environment variable "
                "and name it with api_key_env instead, so it never lands in a file",
                ErrorCode.INVALID_OPTIONS,
            )
        for key, kind in (
            ("headers", dict),
            ("extra_body", dict),
            ("prices", dict),
            ("models", list),
        ):
            if key in table and not isinstance(table[key], kind):
                raise LlmError(
                    f"{path}: [providers.{name}] {key} must be a {'table' if kind is dict else 'list'}",
                    ErrorCode.INVALID_OPTIONS,
                )
        field_name = table.get("max_tokens_field")
        if field_name is not None and (not isinstance(field_name, str) or not field_name):
            raise LlmError(
                f'{path}: [providers.{name}] max_tokens_field must be a field name, e.g. "max_tokens"',
                ErrorCode.INVALID_OPTIONS,
            )
        unknown = set(table) - _ALLOWED_KEYS
        if unknown:
            raise LlmError(
                f"{path}: [providers.{name}] has unknown keys {sorted(unknown)}; allowed: {sorted(_ALLOWED_KEYS)}",
                ErrorCode.INVALID_OPTIONS,
            )
        for key, value in table.items():
            _check_type(path, f"[providers.{name}]", key, value, _KEY_TYPES.get(key))
        for model, pair in (table.get("prices") or {}).items():
            _check_price(path, f"[providers.{name}] prices", model, pair)
        _check_request_parts(path, name, table)
    prices = {
        str(model): (float(v[0]), float(v[1]))
        for model, v in data.get("prices", {}).items()
        if isinstance(v, list | tuple) and len(v) == 2
    }
    return FileConfig(
        default_provider=defaults.get("provider"),
        default_model=defaults.get("model"),
        default_tool_timeout=float(tool_timeout) if tool_timeout is not None else None,
        providers=providers,
        prices=prices,
    )


#: A header name (an HTTP token) and a header value (no line breaks or NUL).
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE = re.compile(r"[^\r\n\x00]*")


def _check_request_parts(path: Path, name: str, table: dict[str, Any]) -> None:
    """What goes into every request must be sendable: checked here, so a bad header or an
    ``extra_body`` that has no JSON form (a TOML date) is one line at start, not a failure of
    each request."""
    for header, value in (table.get("headers") or {}).items():
        if not _HEADER_NAME.fullmatch(header) or not _HEADER_VALUE.fullmatch(value):
            raise LlmError(
                f"{path}: [providers.{name}] headers {header!r} is not a valid HTTP header "
                "(a name of letters, digits and -, a value on one line)",
                ErrorCode.INVALID_OPTIONS,
            )
    if "extra_body" in table:
        try:
            json.dumps(table["extra_body"], allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise LlmError(
                f"{path}: [providers.{name}] extra_body must hold JSON values only (strings, "
                f"numbers, booleans, lists, tables; no dates, no nan/inf): {exc}",
                ErrorCode.INVALID_OPTIONS,
            ) from None
    base_url = table.get("base_url")
    if base_url is not None and not re.match(r"(?i)https?://[^\s/]", base_url):
        raise LlmError(
            f"{path}: [providers.{name}] base_url must be an http:// or https:// URL, not "
            f"{base_url!r}",
            ErrorCode.INVALID_OPTIONS,
        )


def resolve_provider_config(
    name: str,
    file_config: FileConfig | None = None,
    declared: Mapping[str, ProviderConfig] | None = None,
) -> ProviderConfig | None:
    """The configuration for ``name``: its declaration (``declared``, by the plugins), overlaid
    by the config file, then the environment."""
    declared = declared or {}
    base = declared.get(name)
    table = (file_config.providers.get(name) if file_config else None) or {}
    if base is None and not table:
        return None
    if base is None:
        if "adapter" not in table:
            raise LlmError(
                f"provider {name!r} in the config file needs an 'adapter' (e.g. adapter = \"openai\")",
                ErrorCode.INVALID_OPTIONS,
            )
        base = ProviderConfig(name, str(table["adapter"]), source="config file")
    else:
        base = replace(
            base,
            headers=dict(base.headers),
            extra_body=dict(base.extra_body),
            prices=dict(base.prices),
        )
    cfg = base
    if table:
        cfg = replace(
            cfg,
            adapter=str(table.get("adapter", cfg.adapter)),
            base_url=table.get("base_url", cfg.base_url),
            model=table.get("model", cfg.model),
            api_key_env=table.get("api_key_env", cfg.api_key_env),
            headers={**cfg.headers, **table.get("headers", {})},
            extra_body={**cfg.extra_body, **table.get("extra_body", {})},
            models=list(table.get("models", cfg.models)),
            needs_key=bool(
                table.get(
                    "needs_key", cfg.needs_key if name in declared else "api_key_env" in table
                )
            ),
            prices={
                **cfg.prices,
                **{k: (float(v[0]), float(v[1])) for k, v in table.get("prices", {}).items()},
            },
            source="config file" if name not in declared else f"{base.source} + config file",
            max_tokens_field=table.get("max_tokens_field", cfg.max_tokens_field),
            lists_models=table.get("lists_models", cfg.lists_models),
        )
    env_name = name.upper().replace("-", "_")
    if url := os.environ.get(f"NOTEBOOK_LLM_{env_name}_BASE_URL"):
        cfg = replace(cfg, base_url=url, source=cfg.source + " + env")
    if model := os.environ.get(f"NOTEBOOK_LLM_{env_name}_MODEL"):
        cfg = replace(cfg, model=model, source=cfg.source + " + env")
    return cfg
