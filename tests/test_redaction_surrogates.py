"""Every text passes redaction, lone surrogates included (a JSON ``"\\ud800"`` escape in an
answer or a body, undecodable bytes read with ``surrogateescape``), and a key or credential
around them is still hidden. RE2 needs UTF-8, so ``core/linear_re`` matches such text with each
surrogate read as U+FFFD (offsets unchanged) and cuts what it returns from the text as given.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from notebook_llm.conformance.draft.lua_text import comment_text, lua_str, sample
from notebook_llm.core.json_schema_check import check
from notebook_llm.core.linear_re import compile_linear
from notebook_llm.core.redaction import redact, redaction_spans, register_secret

KEY = "sk-surrogate0123456789abcd"

#: Any code point, lone surrogates included and often drawn (hypothesis leaves them out by
#: default), with the characters redaction's patterns look for.
ANY_TEXT = st.text(
    st.one_of(
        st.characters(exclude_categories=()),
        st.integers(0xD800, 0xDFFF).map(chr),
        st.sampled_from("?&=:/@ %\\uabcdekysig"),
    ),
    max_size=80,
)
SURROGATES = st.text(st.integers(0xD800, 0xDFFF).map(chr), min_size=1, max_size=4)


def _clean(text: str) -> str:
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


register_secret(KEY)  # process-wide, as the engine registers keys


@given(ANY_TEXT)
def test_any_text_passes_redaction(text: str) -> None:
    out = redact(text)
    assert isinstance(out, str)
    redaction_spans(text)


@given(ANY_TEXT)
def test_surrogates_change_nothing_but_themselves(text: str) -> None:
    """What is hidden in a text with surrogates is what is hidden with U+FFFD in their place:
    the offsets RE2 reports are the text's own."""
    assert _clean(redact(text)) == redact(_clean(text))


@given(ANY_TEXT, ANY_TEXT)
def test_a_key_between_surrogates_is_hidden(before: str, after: str) -> None:
    text = before + KEY + after
    assert KEY not in redact(text)


@given(SURROGATES, SURROGATES)
def test_credentials_around_surrogates_are_hidden(a: str, b: str) -> None:
    text = f"{a}?api_key=secretvalue{b} https://user:pa{a}ss@host/{b} Bearer abcdefghij{b}"
    out = redact(text)
    assert "secretvalue" not in out
    assert "pa" + a + "ss" not in out
    assert "abcdefghij" not in out
    assert a in out
    assert b in out


def test_a_key_with_a_surrogate_registers_and_is_hidden() -> None:
    """A key read with surrogateescape (a .env's undecodable byte) used to raise in
    ``register_secret``."""
    odd = "sk-odd\udce9key0123456789"
    register_secret(odd)
    assert redact(f"x {odd} y") == "x *** y"
    assert "key0123456789" not in redact("sk-odd%ED%B3%A9key0123456789")


def test_the_drafter_hides_a_credential_that_spans_a_surrogate() -> None:
    """The drafter redacted the runs between surrogates one by one: a URL's password cut by a
    surrogate, or a ``key=`` value holding one, reached the draft."""
    value = "https://user:pa\ud800ss@example.com/?key=abc\udc00def"
    for shown in (lua_str(value), comment_text(value, 400), sample(value, 400)):
        for piece in ("pa\\", "ss@", "abc", "def"):
            assert piece not in shown, shown


def test_lua_str_keeps_surrogates_as_bytes() -> None:
    assert lua_str("a\ud800b") == '"a\\237\\160\\128b"'


def test_schema_patterns_over_surrogates() -> None:
    """An answer's string (JSON ``"\\ud800"``) against a ``pattern``, and a pattern holding a
    surrogate, give verdicts instead of UnicodeEncodeError."""
    assert check({"a": "\ud800"}, {"properties": {"a": {"pattern": "^a"}}})
    assert check({"a": "a\ud800"}, {"properties": {"a": {"pattern": "^a"}}}) == []
    assert check({"a": "\ud800x"}, {"properties": {"a": {"pattern": "^\ud800x$"}}}) == []
    assert check({"\udc00k": 1}, {"patternProperties": {"k$": {"type": "string"}}})


def test_matches_read_the_text_as_given() -> None:
    p = compile_linear(r"(a+)(?P<rest>[^,]*)")
    text = "aa\ud800b,c"
    m = p.search(text)
    assert m is not None
    assert m.group(0) == "aa\ud800b"
    assert m["rest"] == "\ud800b"
    assert m.groups() == ("aa", "\ud800b")
    assert m.span() == (0, 4)
    assert p.sub(r"<\g<rest>\1>", text) == "<\ud800baa>,c"
    assert p.sub(lambda m: m.group(2).upper(), text, count=1) == "\ud800B,c"
    assert [m.group() for m in p.finditer("a\udfff,a")] == ["a\udfff", "a"]
    assert p.fullmatch("a\udfff") is not None
    assert p.match("\udfff") is None
