"""Tools: Python functions the model can call, and the loop that runs them.

>>> from notebook_llm.tools import tool
>>> @tool
... def add(a: int, b: int) -> int:
...     '''Add two integers.
...
...     Args:
...         a: The first.
...         b: The second.
...     '''
...     return a + b
>>> add.schema.parameters["properties"]["a"]
{'type': 'integer', 'description': 'The first.'}
>>> add(2, 3)
5

``await run_tools(engine, "mock", "tools", prompt="add 2 and 3", tools=[add])`` runs the loop
(see :mod:`notebook_llm.tools.loop`).
"""

from __future__ import annotations

from .core import Tool, as_tool, format_result, function_schema, tool
from .docstrings import ParsedDocstring, parse_docstring
from .loop import DECLINED, ConfirmFn, run_tools, stream_tools
from .schema import coerce, schema_for_type
from .validation import check as check_arguments

__all__ = [
    "DECLINED",
    "ConfirmFn",
    "ParsedDocstring",
    "Tool",
    "as_tool",
    "check_arguments",
    "coerce",
    "format_result",
    "function_schema",
    "parse_docstring",
    "run_tools",
    "schema_for_type",
    "stream_tools",
    "tool",
]
