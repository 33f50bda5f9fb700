"""The package's one JSON Schema validator: a tool call's arguments, and a typed answer whose
schema is a JSON Schema dict. A pydantic model's answer is validated by pydantic, a dataclass's
by pydantic or against its type hints: neither gets here.

Why ``jsonschema`` (the reference implementation): it means what the specification means, in
every draft (a ``$ref`` beside other keywords adds to them from 2019-09 on; ``$defs``,
``prefixItems``...), it resolves ``$ref`` without inlining (``referencing``), it is pure Python
(a fault is an exception, never a crash of the kernel), and a keyword's implementation can be
replaced. Three are replaced here, because the answer and the arguments are untrusted:

* ``pattern``, ``patternProperties`` and ``additionalProperties`` (which reads the patterns)
  run on RE2 (:mod:`notebook_llm.core.linear_re`): linear in the text, where ``re`` can
  backtrack for hours on a pattern such as ``^(a+)+$``. A pattern RE2 cannot run (a
  lookaround, a backreference) is refused with the schema (:func:`schema_problem`), as is
  ``unevaluatedProperties`` beside ``patternProperties`` (jsonschema reads those patterns with
  ``re`` there);
* ``$ref`` and ``$dynamicRef`` spend a step budget proportional to the value's size, so a schema
  whose references branch (``A0 = anyOf[A1, A1]``, ...) ends with a one-line problem instead of
  2^depth evaluations; a reference entered again for the same value while it is followed (a
  loop, whatever kind of reference closes it) ends the check in one line too;
* ``uniqueItems`` is one pass over a set of equality keys (:func:`_all_unique`), where
  jsonschema compares every pair of objects (8,000 objects: 106 s).

Every subschema is checked by a class with these replacements, the metaschema check too:
jsonschema picks its own class anew for a subschema that names a ``$schema`` (a ``$ref`` back
to such a root, or to a metaschema), whose ``pattern`` is ``re``; ours picks the same draft's
class of ours (:func:`_validator_class`'s ``evolve``). jsonschema's ``unevaluatedProperties``
matches patterns with ``re`` itself, so it is refused beside ``patternProperties`` anywhere in
the document.

A ``$ref`` to another document (a URL) is never fetched (:func:`_local_registry`): jsonschema's
default fetches it with ``urlopen``, with no timeout or size cap. A schema the library trips
over is a one-line problem too, never a traceback.

A value holding NaN or an infinity (JSON has neither; Python's parser reads ``NaN`` and
``1e999`` into them) is refused before validation: NaN compares false with every ``minimum``.
``format`` is an annotation (not checked), as the specification says by default.

Not fastjsonschema: it knows drafts 4 to 7 only (a ``$ref`` there hides its siblings; no
``$defs`` or ``prefixItems``), and it builds Python source from the schema and runs it. Not
jsonschema-rs, though it imports in tens of milliseconds: it offers no hook for a step budget
(it too evaluates ``A0 = anyOf[A1, A1]`` 2^depth times), it fetches a remote ``$ref`` over the
network unless told not to, and it crashed the interpreter (a segmentation fault, not an
exception) on a value nested 200,000 levels deep: a kernel must not die of an answer.

Cost of the import: jsonschema is imported on the first check, not before. In an environment
where JupyterLab is installed, ``import jsonschema`` also imports the optional format checkers
it finds; the slow ones (``rfc3987_syntax`` builds a grammar: seconds; ``isoduration`` imports
arrow) are deferred to their own first use (:func:`load_jsonschema`), so the first JSON Schema
dict or tool call of a process pays jsonschema's own import (``bench/bench_typed_start.py``), and
a pydantic or dataclass answer pays nothing.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import copy
import functools
import hashlib
import json
import logging
import math
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any

from .linear_re import PatternError, compile_linear

__all__ = [
    "MAX_NESTED_REFS",
    "MAX_SCHEMA_DEPTH",
    "MAX_SCHEMA_NODES",
    "check",
    "load_jsonschema",
    "pointer_target",
    "ref_loop_problem",
    "ref_pointer",
    "schema_problem",
    "size_problem",
    "subschemas",
]

log = logging.getLogger(__name__)

_MAX_ERRORS = 5
#: Characters of one problem line.
_MAX_PROBLEM = 300
#: Schemas nested deeper than this many JSON levels are refused (an object's property is two:
#: ``properties``, then the property): providers allow far less (OpenAI: 10 object levels).
MAX_SCHEMA_DEPTH = 64
#: JSON values a schema may hold (a schema is a few kilobytes; a megabyte-sized one is refused).
MAX_SCHEMA_NODES = 100_000
#: Values nested deeper than this are refused before validation (the validator recurses, some
#: ten frames a level; an answer or arguments nest a few levels).
MAX_VALUE_DEPTH = 64
#: References followed inside one another at once (a value nests at most
#: :data:`MAX_VALUE_DEPTH` levels, a few references each): more is a chain no schema needs, and
#: it would recurse past what the stack holds when Python's recursion limit is raised.
MAX_NESTED_REFS = 256
#: ``$ref`` steps a check may take: this many, plus :data:`REF_STEPS_PER_NODE` per value node.
BASE_REF_STEPS = 2_000
REF_STEPS_PER_NODE = 4

#: Keywords whose value is one schema, a list of schemas, or a map of names to schemas.
SCHEMA_KEYWORDS = frozenset(
    {
        "items",
        "additionalItems",
        "additionalProperties",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
        "extends",  # draft 3: one schema or a list of them
    }
)
#: ``type`` and ``disallow`` hold schemas beside type names in draft 3 (their mappings).
SCHEMA_LIST_KEYWORDS = frozenset(
    {"allOf", "anyOf", "oneOf", "prefixItems", "items", "extends", "type", "disallow"}
)
SCHEMA_MAP_KEYWORDS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)


def subschemas(node: Any) -> Iterator[tuple[tuple[str, ...], Any]]:
    """The schemas directly inside schema ``node``, each with its path from ``node``: only
    where the keywords put schemas (a property *named* ``$defs`` or ``$ref`` is a name, and an
    ``enum`` or ``default`` value is data, never a schema)."""
    if not isinstance(node, Mapping):
        return
    for key, value in node.items():
        if key in SCHEMA_KEYWORDS and isinstance(value, Mapping | bool):
            yield (key,), value
        elif key in SCHEMA_LIST_KEYWORDS and isinstance(value, list):
            for i, sub in enumerate(value):
                if isinstance(sub, Mapping | bool):
                    yield (key, str(i)), sub
        elif key in SCHEMA_MAP_KEYWORDS and isinstance(value, Mapping):
            for name, sub in value.items():
                if isinstance(sub, Mapping | bool):
                    yield (key, str(name)), sub


# ------------------------------------------------------------------------------ schemas


def schema_problem(schema: Any) -> str | None:
    """Why ``schema`` cannot be used (one line), or ``None``: deeper than
    :data:`MAX_SCHEMA_DEPTH`, bigger than :data:`MAX_SCHEMA_NODES`, a ``pattern`` RE2 cannot
    run, ``unevaluatedProperties`` beside ``patternProperties``, a ``$ref`` that leads back to
    itself (:func:`ref_loop_problem`), or not a valid JSON Schema (the metaschema of its
    ``$schema``, 2020-12 by default, says where)."""
    return _prepared(schema)[0]


def _prepared(schema: Any) -> tuple[str | None, Any]:
    """``(problem, schema to validate with)``: :func:`schema_problem`'s verdict and, when there
    is none, a copy of ``schema`` to validate with.

    Kept by content (:data:`_PREPARED`): every typed answer of a ``map`` and every tool call
    checks the same schema again, and the metaschema check is most of a check's time (2.3 of
    2.4 ms for a five-field schema). The key is the SHA-256 of the schema's JSON text, and the
    work is done on a copy read back from that text, so what is kept is what the key says (a
    schema changed in place, or while it is checked, is another key). A schema JSON cannot
    stand for exactly (a tuple, an int key) is checked, and copied, every time."""
    global _PREPARED_CHARS
    if isinstance(schema, bool):
        return None, schema
    if not isinstance(schema, Mapping):
        return f"a JSON Schema is an object, not {type(schema).__name__}", None
    found = size_problem(schema)  # first: bounded before anything writes the schema out
    if found is not None:
        return found, None
    text = None
    if _is_plain_json(schema):
        with contextlib.suppress(TypeError, ValueError, RecursionError):
            text = json.dumps(schema, allow_nan=False)
    if text is None:
        copied = copy.deepcopy(schema)
        found = _content_problem(copied, schema)
        return found, None if found is not None else copied
    key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    with _PREPARED_LOCK:
        if key in _PREPARED:
            _PREPARED.move_to_end(key)
            return _PREPARED[key][:2]
    copied = json.loads(text)
    found = _content_problem(copied, schema)
    # what is kept is charged its text's length, times ~12 for a parsed copy (none if refused)
    kept = (found, None if found is not None else copied, 0 if found else 12 * len(text))
    with _PREPARED_LOCK:
        if key not in _PREPARED:
            _PREPARED[key] = kept
            _PREPARED_CHARS += kept[2]
        while _PREPARED and (
            len(_PREPARED) > _MAX_PREPARED or _PREPARED_CHARS > _MAX_PREPARED_CHARS
        ):
            _PREPARED_CHARS -= _PREPARED.popitem(last=False)[1][2]
    return kept[:2]


#: :func:`_prepared`'s answers by the SHA-256 of the schema's JSON text: ``(problem, schema to
#: validate with, its estimated bytes)``, at most :data:`_MAX_PREPARED` of them and
#: :data:`_MAX_PREPARED_CHARS` bytes in all. An ``OrderedDict`` rather than
#: ``functools.lru_cache``: that one bounds the number of entries only, and one kept copy may
#: be tens of megabytes.
_PREPARED: collections.OrderedDict[bytes, tuple[str | None, Any, int]] = collections.OrderedDict()
_PREPARED_LOCK = threading.Lock()
_MAX_PREPARED = 256
_MAX_PREPARED_CHARS = 128 * 1024 * 1024
_PREPARED_CHARS = 0


def _is_plain_json(value: Any) -> bool:
    """Whether ``value`` is made of dicts with string keys, lists, strings, numbers, booleans
    and ``None`` only: what its JSON text stands for exactly (iterative; the size is bounded by
    :func:`size_problem` first)."""
    stack = [value]
    while stack:
        node = stack.pop()
        if type(node) is dict:
            if not all(type(k) is str for k in node):
                return False
            stack.extend(node.values())
        elif type(node) is list:
            stack.extend(node)
        elif node is not None and type(node) not in (str, int, float, bool):
            return False
    return True


def _content_problem(schema: Mapping[str, Any], original: Mapping[str, Any]) -> str | None:
    """:func:`schema_problem` past the size check, on ``schema`` (a copy of ``original``, whose
    ``$schema`` chooses the draft): patterns, ``$ref`` loops, the metaschema."""
    found = _structure_problem(schema)
    if found is not None:
        return found
    jsonschema = load_jsonschema()
    cls = _base_class(original)
    # our class: jsonschema's uniqueItems is quadratic ({"required": [8,000 names]}: 20 s)
    errors = _validator_class(cls)(cls.META_SCHEMA, registry=_local_registry()).iter_errors(schema)
    error = jsonschema.exceptions.best_match(errors)
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return _short(f"it is not a valid JSON Schema at {where}: {error.message}")


def size_problem(schema: Any) -> str | None:
    """Why ``schema`` is too big or too deep to use (one line), or ``None``. It counts every
    value as often as it is reached, so a Python dict that shares its sub-dicts (``a = {"anyOf":
    [b, b]}``, ...: 2^depth values once written out) is refused after :data:`MAX_SCHEMA_NODES`
    steps, before anything copies or serialises it."""
    nodes = 0
    values: list[tuple[Any, int]] = [(schema, 0)]  # iterative: the depth is what is checked
    while values:
        node, depth = values.pop()
        nodes += 1
        if nodes > MAX_SCHEMA_NODES:
            return f"it holds more than {MAX_SCHEMA_NODES:,} values"
        if depth > MAX_SCHEMA_DEPTH:
            return f"it nests deeper than {MAX_SCHEMA_DEPTH} levels"
        if isinstance(node, Mapping):
            values.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list | tuple):
            values.extend((v, depth + 1) for v in node)
    return None


def _structure_problem(schema: Mapping[str, Any]) -> str | None:
    found = ref_loop_problem(schema)
    if found is not None:
        return found
    schemas: list[Any] = [schema]
    while schemas:
        node = schemas.pop()
        if not isinstance(node, Mapping):
            continue
        for pattern in _patterns_of(node):
            try:
                _regex(pattern)
            except PatternError as exc:
                return _short(
                    f"the pattern {pattern[:80]!r} cannot run in linear time ({exc}): "
                    "lookarounds and backreferences are not supported"
                )
        schemas.extend(sub for _, sub in subschemas(node))
    # jsonschema's unevaluatedProperties matches the patternProperties it finds through any
    # $ref (which may point anywhere in the document) with re: both keys are looked for in
    # every object of the document, not only at schema positions
    pattern_properties, unevaluated = _keys_anywhere(
        schema, ("patternProperties", "unevaluatedProperties")
    )
    if pattern_properties and unevaluated:
        return (
            "unevaluatedProperties beside patternProperties is not supported (its patterns "
            "would be matched by a backtracking engine)"
        )
    return None


def _keys_anywhere(document: Any, keys: tuple[str, ...]) -> list[bool]:
    """For each of ``keys``, whether any object in ``document`` (at any position) has it."""
    found = [False] * len(keys)
    stack = [document]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            for i, key in enumerate(keys):
                found[i] = found[i] or key in node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


#: Keywords whose schemas apply to the same value as the schema holding them (the others
#: descend into an item, a property or a name), where the schema's draft reads them (its
#: validator class's ``VALIDATORS``; ``then`` and ``else`` are read by ``if``). Draft 3's
#: ``extends``, ``type`` and ``disallow`` hold same-value schemas too.
_SAME_VALUE_ONE = frozenset({"not", "if", "extends"})
_SAME_VALUE_LIST = frozenset({"allOf", "anyOf", "oneOf", "extends", "type", "disallow"})
_SAME_VALUE_MAP = frozenset({"dependentSchemas", "dependencies"})
#: Drafts whose ``$ref`` hides the keywords beside it (jsonschema's ``ignore_ref_siblings``).
_REF_ALONE_DRAFTS = frozenset(
    {"Draft3Validator", "Draft4Validator", "Draft6Validator", "Draft7Validator"}
)
#: Drafts whose resources are named by ``id`` rather than ``$id``.
_PLAIN_ID_DRAFTS = frozenset({"Draft3Validator", "Draft4Validator"})


def ref_pointer(ref: str) -> str | None:
    """The JSON pointer of a local ``$ref`` (``#/$defs/a~1b``: percent-decoded, kept escaped
    per token), or ``None`` for a ref that is not a fragment pointer."""
    if not ref.startswith("#"):
        return None
    pointer = urllib.parse.unquote(ref[1:])
    return pointer if pointer == "" or pointer.startswith("/") else None


def pointer_target(root: Any, pointer: str) -> Any:
    """The value ``pointer`` (from :func:`ref_pointer`) names in ``root``, read as
    ``referencing`` reads it (a list index is ``int()`` of the token: ``-1`` is the last item);
    ``LookupError`` when it names nothing."""
    node = root
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and token in node:
            node = node[token]
        elif isinstance(node, list):
            try:
                node = node[int(token)]
            except (ValueError, IndexError):  # "x", "\u00b2", 5,000 digits; past the end
                raise LookupError(pointer) from None
        else:
            raise LookupError(pointer)
    return node


def ref_loop_problem(schema: Mapping[str, Any]) -> str | None:
    """A local ``$ref`` that leads back to itself through schemas of the same value only
    (``A = {"$ref": B}``, ``B = {"allOf": [{"$ref": A}]}``), in one line, or ``None``.

    Checking a value against such a loop never ends (the specification leaves it undefined);
    jsonschema would recurse until Python's limit and the answer would look like it did not fit.
    A loop through ``properties``, ``items``... is ordinary recursion (each turn is one level of
    the value) and is not one of these. Only what a check reads counts: schemas reached from the
    root, the keywords the schema's draft reads, and a draft 3 to 7 ``$ref`` alone; ``anyOf``
    stops at a branch that always holds. Iterative, linear in the schema's size (bounded by
    :func:`size_problem` first). Pointer refs only: one under a nested ``$id`` (another base),
    an ``$anchor`` or a ``$dynamicRef`` is left to the check's own loop guard (:class:`_Steps`),
    which ends any loop on its first turn."""
    cls = _base_class(schema)
    live = cls.VALIDATORS
    # jsonschema's unevaluated* evaluate every anyOf branch (no stop at one that holds)
    short_circuit = not any(_keys_anywhere(schema, ("unevaluatedProperties", "unevaluatedItems")))
    cutoffs: dict[int, int] = {}  # id(anyOf list) -> index of its first branch that holds
    ref_alone = cls.__name__ in _REF_ALONE_DRAFTS
    id_word = "id" if cls.__name__ in _PLAIN_ID_DRAFTS else "$id"
    targets: dict[str, Any] = {}  # each ref string resolved once

    def target_of(ref: str) -> Any:
        if ref not in targets:
            pointer = ref_pointer(ref)
            targets[ref] = None
            if pointer is not None:
                # a $ref that names nothing is the validator's to report
                with contextlib.suppress(LookupError):
                    targets[ref] = pointer_target(schema, pointer)
        return targets[ref]

    # where each schema of the document is: under a nested $id (another base URI) or not
    nested_id: dict[int, bool] = {}
    walk: list[tuple[Any, bool]] = [(schema, False)]
    while walk:
        node, under = walk.pop()
        if not isinstance(node, Mapping) or id(node) in nested_id:
            continue
        base = node.get(id_word)
        under = under or (node is not schema and isinstance(base, str) and base[:1] != "#")
        nested_id[id(node)] = under
        walk.extend((sub, under) for _, sub in subschemas(node))

    def applied(node: Mapping[str, Any]) -> tuple[list[tuple[str | None, Any]], list[Any]]:
        """The schemas a check applies beside ``node``: to its own value (each with the
        ``$ref`` that leads there, ``None`` for a keyword), and to parts of the value."""
        same: list[tuple[str | None, Any]] = []
        ref = node.get("$ref")
        if isinstance(ref, str) and not nested_id.get(id(node), False):
            target = target_of(ref)
            if isinstance(target, Mapping):
                same.append((ref, target))
        if isinstance(ref, str) and ref_alone:
            return same, []
        parts: list[Any] = []
        for path, sub in subschemas(node):
            key = path[0]
            if key in ("$defs", "definitions") or not isinstance(sub, Mapping):
                continue
            if key not in live and not (key in ("then", "else") and "if" in live):
                continue
            if key in ("then", "else") and "if" not in node:
                continue
            if key in _SAME_VALUE_ONE or key in _SAME_VALUE_LIST or key in _SAME_VALUE_MAP:
                if (
                    key == "anyOf"
                    and short_circuit
                    and int(path[1]) > _first_holding(node["anyOf"], cutoffs)
                ):
                    continue  # after a branch that always holds: never evaluated
                same.append((None, sub))
            elif key in ("then", "else"):
                same.append((None, sub))
            else:
                parts.append(sub)
        return same, parts

    # the schemas a check can reach from the root, and their same-value edges
    edges: dict[int, list[tuple[str | None, Any]]] = {}
    reached: list[Mapping[str, Any]] = []
    pending: list[Any] = [schema]
    while pending:
        node = pending.pop()
        if id(node) in edges:
            continue
        same, parts = applied(node)
        edges[id(node)] = same
        reached.append(node)
        pending.extend(sub for _, sub in same)
        pending.extend(parts)

    # depth-first search of the same-value graph: a grey node met again closes a loop
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    for start in reached:
        if id(start) in state:
            continue
        state[id(start)] = 1
        path: list[tuple[Mapping[str, Any], str | None]] = [(start, None)]
        stack = [iter(edges[id(start)])]
        while stack:
            step = next(stack[-1], None)
            if step is None:
                stack.pop()
                state[id(path.pop()[0])] = 2
                continue
            ref, target = step
            seen = state.get(id(target), 0)
            if seen == 1:
                at = next(i for i, (n, _) in enumerate(path) if n is target)
                refs = [r for _, r in [*path[at + 1 :], (target, ref)] if r is not None]
                shown = [*refs[-1:], *refs]
                if len(shown) > 5:  # a long loop: its start and end
                    shown = [*shown[:3], "...", shown[-1]]
                loop = " -> ".join(r if r == "..." else json.dumps(r)[:60] for r in shown)
                return _short(
                    f"its $ref {loop.split(' -> ')[0]} leads back to itself without reaching a "
                    f"part of the value ({loop}): checking anything against it would never "
                    "end (put the recursion under properties or items)"
                )
            if seen == 0:
                state[id(target)] = 1
                path.append((target, ref))
                stack.append(iter(edges[id(target)]))
    return None


def _first_holding(branches: list[Any], cutoffs: dict[int, int]) -> int:
    """The index of the first branch of an ``anyOf`` that always holds (``true``, ``{}``), or
    its length: jsonschema stops at the first branch that holds. Found once per list."""
    if id(branches) not in cutoffs:
        cutoffs[id(branches)] = next(
            (i for i, b in enumerate(branches) if b is True or (isinstance(b, Mapping) and not b)),
            len(branches),
        )
    return cutoffs[id(branches)]


def _patterns_of(node: Mapping[str, Any]) -> list[str]:
    found = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
    props = node.get("patternProperties")
    if isinstance(props, Mapping):
        found.extend(p for p in props if isinstance(p, str))
    return found


@functools.lru_cache(maxsize=512)
def _regex(pattern: str) -> Any:
    """A schema's pattern compiled by RE2 (ECMA-262's common syntax is RE2's; ``\\d``, ``\\w``
    are ASCII in both)."""
    return compile_linear(pattern)


# ------------------------------------------------------------------------------ values


def check(value: Any, schema: Mapping[str, Any] | bool, path: str = "$") -> list[str]:
    """Problems of ``value`` against ``schema``, as ``"<path>: <problem>"`` lines (``[]``: valid).

    At most a handful of problems are reported; the first ones are the useful ones. A schema
    that cannot be used at all (see :func:`schema_problem`) is one problem at ``path``. With
    ``path=""`` the places are written as a typed answer's messages write them (``a.0.b``)."""
    bad = _value_problem(value, path)
    if bad is not None:
        return [bad]
    root = path or "(root)"
    problem, checked = _prepared(schema)
    if problem is not None:
        return [f"{root}: the schema cannot be used: {problem}"]
    steps = _Steps(BASE_REF_STEPS + REF_STEPS_PER_NODE * _count_nodes(value))
    token = _STEPS.set(steps)
    try:
        validator = _validator_class(_base_class(schema))(checked, registry=_local_registry())
        errors = []
        for error in validator.iter_errors(value):
            errors.append(error)
            if len(errors) >= _MAX_ERRORS:
                break
    except _unresolvable() as exc:
        return [
            f"{root}: the schema cannot be used: its $ref {_json(getattr(exc, 'ref', ''))} is "
            "not inside it (references to other documents are not fetched: put the "
            "definition in $defs)"
        ]
    except _TooCostly:
        return [
            f"{root}: checking this value took more than {steps.limit:,} $ref steps: the "
            "schema's references branch too much to check (simplify its anyOf/oneOf of $refs)"
        ]
    except _RefLoop as exc:
        return [
            f"{root}: the schema cannot be used: its reference {_json(exc.ref)} leads back to "
            "itself without reaching a part of the value (checking would never end)"
        ]
    except _RefsTooDeep:
        return [
            f"{root}: the schema cannot be used: it follows more than {MAX_NESTED_REFS} "
            "references inside one another for this value"
        ]
    except RecursionError:
        return [f"{root}: the schema and the value nest too deeply to check"]
    except Exception as exc:  # a schema the library trips over (referencing, on draft 3's
        # one-schema ``extends`` holding a $ref to another document: AttributeError)
        log.debug("the JSON Schema validator failed on a schema", exc_info=True)
        return [
            f"{root}: the schema cannot be used: the validator failed on it "
            f"({type(exc).__name__}: {_short(str(exc))[:120]})"
        ]
    finally:
        _STEPS.reset(token)
    jsonschema = load_jsonschema()
    errors.sort(key=jsonschema.exceptions.relevance)
    return [_describe(error, path) for error in errors]


def _describe(error: Any, root: str) -> str:
    """One problem line: where, then what, in the words a model fixes arguments by (the usual
    keywords get a plain sentence; the others keep jsonschema's message)."""
    return _short(f"{_where(root, list(error.absolute_path))}: {_message(error)}")


def _where(root: str, keys: list[Any]) -> str:
    """``$.a[0].b`` under root ``$``; under root ``""`` the dotted form a typed answer's
    messages use (``a.0.b``, ``(root)``)."""
    if not root:
        return ".".join(str(k) for k in keys) or "(root)"
    return root + "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys)


def _message(error: Any) -> str:
    value, keyword, expected = error.instance, error.validator, error.validator_value
    if keyword == "type":
        names = [expected] if isinstance(expected, str) else list(expected)
        return f"expected {' or '.join(names)}, got {_kind(value)} {_json(value)}"
    if keyword == "enum" and isinstance(expected, list):
        return f"{_json(value)} is not one of {', '.join(_json(v) for v in expected)}"
    if keyword == "const":
        return f"expected {_json(expected)}, got {_json(value)}"
    if keyword == "required" and isinstance(value, Mapping):
        missing = [r for r in expected if r not in value]
        return f"missing required {', '.join(repr(m) for m in missing)}"
    if error.context and keyword in ("anyOf", "oneOf"):
        best = load_jsonschema().exceptions.best_match(error.context)
        if best is not None:
            return f"matches none of the allowed forms ({_message(best)})"
    return str(error.message)


def _kind(value: Any) -> str:
    kinds = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"))
    if value is None:
        return "null"
    for kind, name in kinds:
        if isinstance(value, kind):
            return name
    return "array" if isinstance(value, list) else "object" if isinstance(value, Mapping) else ""


def _json(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_PROBLEM else text[: _MAX_PROBLEM - 3] + "..."


def _value_problem(value: Any, path: str) -> str | None:
    """NaN or an infinity anywhere in ``value``, or nesting deeper than :data:`MAX_VALUE_DEPTH`
    (iterative, so a deep value cannot exhaust the stack here)."""
    # (node, depth, key, parent entry): the path is spelled out only for a problem
    stack: list[tuple[Any, int, Any, Any]] = [(value, 0, None, None)]
    while stack:
        entry = stack.pop()
        node, depth = entry[0], entry[1]
        problem = None
        if isinstance(node, float) and not math.isfinite(node):
            problem = f"{node!r} is not a number JSON can carry (NaN or infinite)"
        elif depth > MAX_VALUE_DEPTH:
            problem = f"the value nests deeper than {MAX_VALUE_DEPTH} levels"
        if problem is not None:
            keys = []
            while entry[3] is not None:
                keys.append(entry[2])
                entry = entry[3]
            return f"{_where(path, list(reversed(keys)))}: {problem}"
        if isinstance(node, Mapping):
            stack.extend((v, depth + 1, k, entry) for k, v in node.items())
        elif isinstance(node, list | tuple):
            stack.extend((v, depth + 1, i, entry) for i, v in enumerate(node))
    return None


def _count_nodes(value: Any) -> int:
    count = 0
    stack = [value]
    while stack:
        node = stack.pop()
        count += 1
        if isinstance(node, Mapping):
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return count


# ------------------------------------------------------------------------------ the validator


class _TooCostly(Exception):
    """The step budget of one check is spent."""


class _RefLoop(Exception):
    """A ``$ref`` was entered again for the same value while it was still being followed."""

    def __init__(self, ref: Any) -> None:
        super().__init__(ref)
        self.ref = ref


class _RefsTooDeep(Exception):
    """More than :data:`MAX_NESTED_REFS` references are followed at once."""


class _Steps:
    """One check's ``$ref`` budget, and the references being followed now (each the schema
    holding it and the value it is applied to): a JSON value never holds itself, so meeting
    the same pair again inside itself is a loop on the same value, whatever kind of reference
    (``$ref``, ``$dynamicRef``, an ``$anchor``, a URL ``$id``) closes it. The static check
    (:func:`ref_loop_problem`) refuses the plain ones with the schema; this ends the others
    where Python's recursion limit would (or, with a raised limit, where C's stack would not)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.taken = 0
        self.following: set[tuple[int, int]] = set()

    def take(self) -> None:
        self.taken += 1
        if self.taken > self.limit:
            raise _TooCostly


_STEPS: contextvars.ContextVar[_Steps | None] = contextvars.ContextVar(
    "notebook_llm_json_schema_steps", default=None
)


#: Optional format checkers that jsonschema imports when it is first imported and that this
#: module never calls (``format`` is an annotation here), each with the functions jsonschema's
#: ``_format`` takes from it. Each is slow to import where it is installed (JupyterLab's
#: environment brings all three), measured in a kernel-like process:
#:
#: * ``rfc3987_syntax`` builds a Lark grammar: 2-4 s (formats ``iri``, ``iri-reference``);
#: * ``isoduration`` imports arrow and dateutil: about 20 ms (``duration``);
#: * ``rfc3986_validator`` compiles its grammar's regular expressions: about 10 ms (``uri``).
_DEFERRED_FORMAT_MODULES: dict[str, tuple[str, ...]] = {
    "rfc3987_syntax": ("is_valid_syntax",),
    "isoduration": ("parse_duration",),
    "rfc3986_validator": ("validate_rfc3986",),
}
#: Error classes jsonschema reads from a deferred module at its import (``raises=``), each
#: answered by a base class of the real one, which catches it.
_DEFERRED_ERRORS: dict[str, dict[str, type[Exception]]] = {
    "isoduration": {"DurationParsingException": ValueError},
}


#: Deferred modules whose import failed (warned about once).
_BROKEN_FORMAT_MODULES: set[str] = set()

#: Set on a stand-in module (in its ``__dict__``), so it is never taken for the real one.
_STAND_IN_MARK = "__notebook_llm_stand_in__"


def _real_module(module: str) -> Any:
    """The real module a stand-in answers for, imported now. A stand-in still in
    ``sys.modules`` (jsonschema's first import is under way, in this thread or another) is taken
    out first, so that the import finds the real module and not the stand-in again."""
    import importlib
    import sys
    import types

    current = sys.modules.get(module)
    if isinstance(current, types.ModuleType) and current.__dict__.get(_STAND_IN_MARK):
        sys.modules.pop(module, None)
    return importlib.import_module(module)


def _deferred_function(module: str, name: str) -> Any:
    """Stands for ``module.name`` in one of jsonschema's format checkers: imports the real module
    on the first call (someone's own ``FormatChecker``) and hands on. A module installed but
    broken (``isoduration`` without arrow) answers "valid", with one warning, as jsonschema
    alone, which would not have registered the format, lets every value pass: ``iri`` and
    ``uri`` then pass every value; ``duration`` still runs jsonschema's own last test (the value
    ends in a unit letter), which plain jsonschema would not have run."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            real = _real_module(module)
        except ImportError as exc:
            if module not in _BROKEN_FORMAT_MODULES:
                _BROKEN_FORMAT_MODULES.add(module)
                log.warning("format checks that need %s are not run: %s", module, exc)
            return True
        return getattr(real, name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    return call


def _stand_in(module: str, spec: Any) -> Any:
    """A module that answers for ``module`` while jsonschema is first imported: the functions
    and error classes jsonschema reads at its import (:data:`_DEFERRED_FORMAT_MODULES`,
    :data:`_DEFERRED_ERRORS`), and for any other name the real module's (PEP 562
    ``__getattr__``). So a jsonschema that reads more than listed here, or code in another
    thread that imports the module meanwhile and keeps the stand-in, gets the real thing. A
    package's stand-in has its ``__path__`` (from ``spec``, the real module's), so a submodule
    imported meanwhile is found."""
    import types

    stand_in = types.ModuleType(module)
    stand_in.__dict__[_STAND_IN_MARK] = True
    if spec.submodule_search_locations is not None:
        stand_in.__path__ = list(spec.submodule_search_locations)
    for name in _DEFERRED_FORMAT_MODULES[module]:
        setattr(stand_in, name, _deferred_function(module, name))
    for name, error in _DEFERRED_ERRORS.get(module, {}).items():
        setattr(stand_in, name, error)

    def __getattr__(name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):  # the import system's questions
            raise AttributeError(name)  # (``__file__``...), not the module's API
        return getattr(_real_module(module), name)

    stand_in.__getattr__ = __getattr__  # type: ignore[method-assign]
    return stand_in


def load_jsonschema() -> Any:
    """jsonschema, imported here (not at module import: see the module docstring).

    jsonschema imports every optional format checker it finds when it is first imported, and
    some of them are slow to import (:data:`_DEFERRED_FORMAT_MODULES`). While jsonschema is first
    imported, a stand-in module (:func:`_stand_in`) answers for each of those that is installed
    and not yet imported, and is removed at once: a user's own format check still works, and
    pays the real import on its first call (a broken install of the module answers "valid"
    there, with a warning: :func:`_deferred_function`). No library defers an import that
    another library makes with ``from x import y``, hence these few lines."""
    import sys

    if "jsonschema" in sys.modules:
        import jsonschema

        return jsonschema
    import importlib.util

    stand_ins: dict[str, Any] = {}
    for module in _DEFERRED_FORMAT_MODULES:
        spec = None if module in sys.modules else importlib.util.find_spec(module)
        if spec is None:
            continue
        stand_in = _stand_in(module, spec)
        if sys.modules.setdefault(module, stand_in) is stand_in:  # never over a real one
            stand_ins[module] = stand_in
    try:
        import jsonschema
    finally:
        for module, stand_in in stand_ins.items():
            if sys.modules.get(module) is stand_in:  # the real module may be there by now
                del sys.modules[module]
    return jsonschema


@functools.cache
def _local_registry() -> Any:
    """The schema registry every validator here gets: empty, and it fetches nothing, so a
    ``$ref`` to another document (a URL) cannot be resolved. jsonschema's default fetches it
    with ``urlopen``, with no timeout, size cap or recording: a tool's or MCP server's schema
    could hang the kernel or make it fetch any URL. jsonschema adds its own metaschemas to it."""
    import referencing

    return referencing.Registry()


def _unresolvable() -> type[Exception]:
    """The error a ``$ref`` that cannot be resolved raises (``referencing``'s; jsonschema raises
    a subclass of it)."""
    import referencing.exceptions

    return referencing.exceptions.Unresolvable


def _base_class(schema: Any) -> Any:
    """The validator class of the schema's ``$schema`` (2020-12 when it names none, or names
    one with a value that is not a string: the metaschema then says what is wrong)."""
    jsonschema = load_jsonschema()
    default = jsonschema.validators.Draft202012Validator
    if isinstance(schema, Mapping) and not isinstance(schema.get("$schema", ""), str):
        return default
    return jsonschema.validators.validator_for(schema, default=default)


@functools.cache
def _validator_class(base: Any) -> Any:
    """``base`` with the keywords of the module docstring replaced (built once per draft)."""
    import attrs  # jsonschema's validators are attrs classes

    jsonschema = load_jsonschema()
    error = jsonschema.exceptions.ValidationError
    original = base.VALIDATORS

    def pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[Any]:
        if validator.is_type(instance, "string") and not _regex(patrn).search(instance):
            yield error(f"{_preview(instance)} does not match {patrn!r}")

    def pattern_properties(validator: Any, props: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        for patrn, subschema in props.items():
            regex = _regex(patrn)
            for key, item in instance.items():
                if regex.search(key):
                    yield from validator.descend(item, subschema, path=key, schema_path=patrn)

    def additional_properties(validator: Any, extra: Any, instance: Any, schema: Any) -> Any:
        if not validator.is_type(instance, "object"):
            return
        props = schema.get("properties", {})
        regexes = [_regex(p) for p in schema.get("patternProperties", {})]
        extras = [k for k in instance if k not in props and not any(r.search(k) for r in regexes)]
        if validator.is_type(extra, "object"):
            for key in extras:
                yield from validator.descend(instance[key], extra, path=key)
        elif not extra and extras:
            allowed = ", ".join(repr(k) for k in props) or "none"
            for key in extras[:5]:
                yield error(f"unexpected property {key!r} (allowed: {allowed})")

    def counted(keyword: Any) -> Any:
        def run(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
            steps = _STEPS.get()
            if steps is None:
                yield from keyword(validator, value, instance, schema)
                return
            steps.take()
            here = (id(schema), id(instance))
            if here in steps.following:
                raise _RefLoop(value)
            if len(steps.following) >= MAX_NESTED_REFS:
                raise _RefsTooDeep
            steps.following.add(here)
            try:
                yield from keyword(validator, value, instance, schema)
            finally:
                steps.following.discard(here)

        return run

    def unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if unique and validator.is_type(instance, "array") and not _all_unique(instance):
            yield error(f"{_json(instance)} has non-unique elements")

    replaced: dict[str, Any] = {
        "pattern": pattern,
        "patternProperties": pattern_properties,
        "additionalProperties": additional_properties,
        "uniqueItems": unique_items,
    }
    for name in ("$ref", "$dynamicRef", "$recursiveRef"):
        if name in original:
            replaced[name] = counted(original[name])
    ours = jsonschema.validators.extend(base, replaced)

    def evolve(self: Any, **changes: Any) -> Any:
        """jsonschema's ``evolve`` (how every subschema is checked, through ``descend``), except
        for the class: jsonschema picks its own for a subschema that names a ``$schema`` (a
        ``$ref`` to a root or a definition that names its draft, or to a metaschema), and
        stays on it for every ``$ref`` below, without the keywords replaced here (``pattern``
        on ``re``, no step budget, no loop guard). Here it is the same draft's class of ours."""
        subschema = changes.setdefault("schema", self.schema)
        named = base
        if isinstance(subschema, Mapping) and isinstance(subschema.get("$schema"), str):
            named = jsonschema.validators.validator_for(subschema, default=base)
        new = ours if named is base else _validator_class(named)
        for field in attrs.fields(type(self)):
            if field.init and field.alias not in changes:
                changes[field.alias] = getattr(self, field.name)
        return new(**changes)

    ours.evolve = evolve
    return ours


def _all_unique(items: list[Any]) -> bool:
    """Whether no two of ``items`` are equal as JSON values, in one pass over a set of
    :func:`_equality_key` keys. jsonschema's own ``uniqueItems`` compares every pair when the
    items are objects: 8,000 objects (100 KB of an answer) took 106 s, with no Stop."""
    seen: set[Any] = set()
    for item in items:
        key = _equality_key(item)
        if key in seen:
            return False
        seen.add(key)
    return True


def _equality_key(value: Any) -> Any:
    """A hashable key equal for two values exactly when JSON Schema calls them equal: numbers by
    value (``1`` and ``1.0``; Python's ``==`` and ``hash`` agree on those), booleans apart from
    numbers, objects whatever their key order. The value's depth is bounded before validation
    (:data:`MAX_VALUE_DEPTH`), so the recursion is too."""
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if value is None:
        return ("null",)
    if isinstance(value, list | tuple):
        return ("array", tuple(_equality_key(item) for item in value))
    if isinstance(value, Mapping):
        return ("object", frozenset((k, _equality_key(v)) for k, v in value.items()))
    return ("other", repr(value))


def _preview(value: str) -> str:
    return repr(value) if len(value) <= 60 else repr(value[:57] + "...")
