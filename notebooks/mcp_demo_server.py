"""A small MCP server for notebooks/mcp_tools.ipynb, written with the official SDK's MCPServer
(FastMCP in the SDK's 1.x). Run by the notebook over stdio: ``python mcp_demo_server.py``."""

import zlib

from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("demo")


@server.tool()
def forecast(city: str) -> dict[str, object]:
    """The weather forecast for a city (made up, the same every time)."""
    return {"city": city, "today": "sunny", "high_c": 21, "low_c": 14}


@server.tool()
def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


@server.tool()
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    if b == 0:
        raise ToolError("cannot divide by zero")
    return a / b


@server.tool()
def bar_chart(values: list[int]) -> Image:
    """Draw the values as a small bar chart (a PNG)."""
    height = max(values, default=1) * 8
    rows = []
    for y in range(height, 0, -1):
        row = b"".join(b"\x33\x66\xcc" * 6 if v * 8 >= y else b"\xff\xff\xff" * 6 for v in values)
        rows.append(b"\x00" + row)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            len(data).to_bytes(4, "big")
            + kind
            + data
            + zlib.crc32(kind + data).to_bytes(4, "big")
        )

    size = (6 * len(values)).to_bytes(4, "big") + height.to_bytes(4, "big")
    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", size + b"\x08\x02\x00\x00\x00")
        + chunk(b"IDAT", zlib.compress(b"".join(rows)))
        + chunk(b"IEND", b"")
    )
    return Image(data=png, format="png")


if __name__ == "__main__":
    server.run()
