"""Tools: Python functions the model can call, and the loop that runs them.

>>> from notebook_llm.api.tool_calling import tool
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
(see :mod:`notebook_llm.api.tool_calling.loop`).
"""

from __future__ import annotations

from ...core.json_schema_check import check as check_arguments
from .docstrings import ParsedDocstring, parse_docstring
from .loop import DECLINED, ConfirmFn, run_tools, stream_tools
from .tools import Tool, as_tool, format_result, function_schema, tool
from .type_schema import coerce, schema_for_type

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
