"""A long option typed with one dash (``-temperature 0.2``) or misspelt (``--max_tokens``),
caught before argparse reads it.

argparse reads ``-temperature`` as the short option ``-t`` with the value ``emperature``, and
then says "invalid float value: 'emperature'", which sends the user looking at the number; and
it answers ``--max_tokens`` with "unrecognized arguments" and no more. The ``%%llm`` line and
the command line both ask :func:`option_hint` first, and say "did you mean --temperature?" /
"did you mean --max-tokens?" instead. Shared by the magics and ``python -m notebook_llm``, so
it imports nothing of either.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence

__all__ = ["misspelt_long_option", "option_hint", "single_dash_long_option"]

#: A ``--word`` longer than this is no option anyone meant: not compared with the options.
_MAX_COMPARED = 64

_SINGLE_DASH_WORD = re.compile(r"-([A-Za-z][A-Za-z0-9_-]+)(?:=.*)?")


def single_dash_long_option(
    words: Sequence[str], long_options: Iterable[str], takes_value: Iterable[str] = ()
) -> str | None:
    """The message for the first word that is a long option written with one dash, or ``None``.

    ``long_options`` are the parser's ``--names``; a word matches one when ``-`` + the word is
    that option or an abbreviation argparse would accept (``-temp`` -> ``--temperature``), so an
    attached short-option value (``-t0.2``) or a negative number is never taken for one. A word
    right after an option in ``takes_value`` is that option's value, and is not looked at.
    """
    options = sorted(set(long_options))
    valued = set(takes_value)
    previous = ""
    for word in words:
        m = _SINGLE_DASH_WORD.fullmatch(word)
        if m and previous not in valued:
            typed = "--" + m.group(1)
            exact = [o for o in options if o == typed]
            prefixed = [o for o in options if o.startswith(typed)]
            found = exact or (prefixed if len(prefixed) == 1 else [])
            if found:
                rest = word[len(m.group(1)) + 1 :]
                return f"{word.split('=')[0]} is not an option: did you mean {found[0]}{rest}?"
        previous = word
    return None


def misspelt_long_option(
    words: Sequence[str], long_options: Iterable[str], takes_value: Iterable[str] = ()
) -> str | None:
    """The message for the first ``--word`` that is no option but close to one, or ``None``.

    ``--max_tokens`` (underscores for dashes) is ``--max-tokens``; otherwise the closest option
    by :mod:`difflib` (``--temprature``). An abbreviation argparse accepts is no mistake; a word
    after an option in ``takes_value`` is that option's value, and nothing after ``--`` is
    looked at.
    """
    options = sorted(set(long_options))
    valued = set(takes_value)
    previous = ""
    for word in words:
        if word == "--":
            return None
        name = word.split("=", 1)[0]
        if (
            name.startswith("--")
            and 2 < len(name) <= _MAX_COMPARED
            and previous not in valued
            and not any(o.startswith(name) for o in options)
        ):
            dashed = name.replace("_", "-")
            found = (
                [dashed]
                if dashed in options
                else difflib.get_close_matches(name, options, n=1, cutoff=0.75)
            )
            if found:
                return f"{name} is not an option: did you mean {found[0]}?"
        previous = word
    return None


def option_hint(
    words: Sequence[str], long_options: Iterable[str], takes_value: Iterable[str] = ()
) -> str | None:
    """:func:`single_dash_long_option`, then :func:`misspelt_long_option`: the one line to show
    instead of argparse's own message, or ``None``."""
    options, valued = list(long_options), list(takes_value)
    return single_dash_long_option(words, options, valued) or misspelt_long_option(
        words, options, valued
    )
