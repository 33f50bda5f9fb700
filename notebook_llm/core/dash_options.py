"""A long option typed with one dash (``-temperature 0.2``), caught before argparse reads it.

argparse reads ``-temperature`` as the short option ``-t`` with the value ``emperature``, and
then says "invalid float value: 'emperature'", which sends the user looking at the number. The
``%%llm`` line and the command line both ask :func:`single_dash_long_option` first, and say
"did you mean --temperature?" instead. Shared by the magics and ``python -m notebook_llm``, so
it imports nothing of either.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

__all__ = ["single_dash_long_option"]

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
