"""Prompt interpolation: only names that resolve are replaced; nothing is evaluated."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from notebook_llm.notebook.magics.interpolate import fields, interpolate, near_misses


class Boom:
    @property
    def bad(self) -> str:
        raise RuntimeError("no")

    _private = "hidden"


NS: dict[str, Any] = {
    "x": 42,
    "items": ["a", "b"],
    "d": {"k": "v", "n": {"deep": 1}},
    "obj": SimpleNamespace(name="Ada", tags=["t0"]),
    "boom": Boom(),
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("value {x}", "value 42"),
        ("{items[0]}{items[-1]}", "ab"),
        ("{d['k']} {d[\"k\"]} {d['n']['deep']}", "v v 1"),
        ("{obj.name} {obj.tags[0]}", "Ada t0"),
        ("{missing} stays", "{missing} stays"),
        ("{items[5]} {d['nope']} {obj.nope}", "{items[5]} {d['nope']} {obj.nope}"),
        ('{"a": 1, "b": [1, 2]}', '{"a": 1, "b": [1, 2]}'),
        (r"\frac{x}{y} and \mathbb{R}", r"\frac42{y} and \mathbb{R}"),
        (
            "def f(): return {k: v for k, v in d.items()}",
            "def f(): return {k: v for k, v in d.items()}",
        ),
        ("f'{x!r} {x:>3}'", "f'{x!r} {x:>3}'"),
        ("{ x }", "{ x }"),
        ("{{x}} is literal", "{x} is literal"),
        ("{{ user }} jinja", "{{ user }} jinja"),
        ("{{missing}}", "{{missing}}"),
        ("{boom.bad} {boom._private} {x.__class__}", "{boom.bad} {boom._private} {x.__class__}"),
        ("no braces", "no braces"),
    ],
)
def test_interpolate(text: str, expected: str) -> None:
    assert interpolate(text, NS) == expected


def test_no_calls_or_expressions() -> None:
    ns = {"os": __import__("os"), "x": 1}
    text = "{os.system('echo hi')} {x + 1} {__import__('os')}"
    assert interpolate(text, ns) == text


def test_fields_lists_only_resolving_names() -> None:
    assert fields("{x} {missing} {obj.name}", NS) == ["x", "obj.name"]


def test_near_misses_suggest_a_defined_name_for_a_typo() -> None:
    ns = {"city": "Paris", "country": "France", "In": [], "_private": 1}
    assert near_misses("weather in {ctiy}", ns) == [("ctiy", "city")]
    assert near_misses("{cuntry.name} and {ctiy[0]}", ns) == [
        ("cuntry.name", "country.name"),
        ("ctiy[0]", "city[0]"),
    ]
    # defined names, nothing close, JSON, LaTeX, escapes and private names: no suggestion
    assert near_misses('{city} {zzzzz} {"a": 1} \\frac{a}{b} {{ctiy}} {_privte}', ns) == []
    assert near_misses("{city.nope}", ns) == []  # the name is defined: not a typo of it
    assert near_misses("no braces", ns) == []
