"""An MCP result as the model gets it, and a server's words as a notebook shows them: the
protocol's content blocks (text, images, structured content, the rest named), capped; names
and descriptions rendered through the sanitizer as untrusted text."""

from __future__ import annotations

import base64

from notebook_llm.api.mcp.results import MAX_IMAGES, reply_of
from notebook_llm.api.mcp.servers import ServerStatus
from notebook_llm.api.mcp.tools import McpTool, parse_spec
from notebook_llm.notebook.widgets.mcp_view import McpServerTable

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 32).decode()


def test_text_blocks_in_order_and_is_error() -> None:
    reply = reply_of(
        {
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
            "isError": True,
        },
        max_chars=100,
    )
    assert (reply.text, reply.is_error, reply.images) == ("one\ntwo", True, [])


def test_images_go_on_as_images_and_the_text_names_them() -> None:
    blocks = [{"type": "image", "data": PNG, "mimeType": "image/png"}] * (MAX_IMAGES + 1)
    reply = reply_of({"content": blocks}, max_chars=10_000)
    assert len(reply.images) == MAX_IMAGES
    assert reply.images[0].media_type == "image/png"
    assert reply.images[0].data == PNG
    assert "[image 1: image/png" in reply.text
    assert f"[an image (image/png) not passed on: at most {MAX_IMAGES} per result]" in reply.text
    broken = reply_of({"content": [{"type": "image", "data": "%%%"}]}, max_chars=1000)
    assert broken.images == []
    assert "whose data is not base64" in broken.text
    svg = reply_of(
        {"content": [{"type": "image", "data": PNG, "mimeType": "image/svg+xml"}]}, max_chars=1000
    )
    assert svg.images == []  # an SVG is a document, not passed on as a picture
    assert "cannot be passed on" in svg.text


def test_structured_content_is_given_unless_the_text_holds_it() -> None:
    data = {"city": "Lisbon", "temp": 21}
    alone = reply_of({"content": [], "structuredContent": data}, max_chars=1000)
    assert alone.text == '{"city": "Lisbon", "temp": 21}'
    both = reply_of(
        {
            "content": [{"type": "text", "text": '{"temp": 21, "city": "Lisbon"}'}],
            "structuredContent": data,
        },
        max_chars=1000,
    )
    assert both.text == '{"temp": 21, "city": "Lisbon"}'
    wrapped = reply_of(
        {"content": [{"type": "text", "text": "hi"}], "structuredContent": {"result": "hi"}},
        max_chars=1000,
    )
    assert wrapped.text == "hi"
    extra = reply_of(
        {"content": [{"type": "text", "text": "3 items"}], "structuredContent": {"n": 3}},
        max_chars=1000,
    )
    assert extra.text == '3 items\n{"n": 3}'


def test_other_blocks_are_named_and_an_empty_result_is_said() -> None:
    reply = reply_of(
        {
            "content": [
                {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt"},
                {"type": "resource", "resource": {"uri": "file:///b.txt", "text": "inside b"}},
                {"type": "resource", "resource": {"uri": "file:///c.bin", "blob": "AAAA"}},
            ]
        },
        max_chars=1000,
    )
    assert reply.text.splitlines() == [
        "[audio (audio/wav): not passed on]",
        "[resource link a.txt file:///a.txt]",
        "[resource file:///b.txt]",
        "inside b",
        "[resource file:///c.bin (binary): not passed on]",
    ]
    assert reply_of({"content": []}, max_chars=1000).text == "(the tool returned nothing)"


def test_a_huge_result_is_cut_and_the_cut_is_said() -> None:
    reply = reply_of({"content": [{"type": "text", "text": "y" * 5000}]}, max_chars=1000, tool="t")
    assert reply.text.startswith("y" * 1000 + "\n[… tool 't' returned 5,000 characters;")
    assert reply.text.endswith("only the first 1,000 are shown (max_result_chars)]")


def test_deep_structured_content_is_refused_not_recursed() -> None:
    deep: object = []
    for _ in range(5000):
        deep = [deep]
    reply = reply_of({"content": [], "structuredContent": deep}, max_chars=1000)
    assert reply.text == "[structured content nested too deeply to pass on]"


def test_specs() -> None:
    assert parse_spec("mcp:time") == ("time", None)
    assert parse_spec("mcp:git/git_log") == ("git", "git_log")


def test_a_provider_refused_name_is_offered_safely() -> None:
    from notebook_llm.api.mcp.tools import _offered_name

    taken: set[str] = set()
    assert _offered_name("search.web", taken) == "search_web"
    assert _offered_name("search_web", taken) == "search_web_2"
    assert _offered_name("x" * 100, taken) == "x" * 64
    tool = McpTool(
        "s", {"name": "search.web", "inputSchema": {"type": "object"}}, name="search_web"
    )
    assert (tool.name, tool.remote_name, tool.source) == ("search_web", "search.web", "mcp:s")


def test_a_servers_names_and_descriptions_are_untrusted_text() -> None:
    hostile = {
        "name": "evil\x1b[2J<b>",
        "description": 'Reads files. <img src=x onerror="alert(1)"><script>steal()</script> '
        "[click](javascript:alert(2)) **bold**",
        "inputSchema": {"type": "object"},
    }
    table = McpServerTable(
        [ServerStatus("srv\x1b[31m", "stdio", "srv --x", "here", "ready", tools=[hostile])]
    )
    html = table.html()
    elements = _elements(html)
    assert not {tag for tag, _ in elements} & {"img", "script", "iframe", "style"}
    for _tag, attributes in elements:
        for name, value in attributes:
            assert not name.startswith("on"), name
            assert not (value or "").lower().startswith("javascript"), value
    assert "\x1b" not in html
    assert "<strong>bold</strong>" in html  # Markdown, as for a model's answer
    plain = table.plain()
    assert "\x1b" not in plain
    assert "Reads files." in plain


def _elements(html: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    """Every element of ``html`` with its attributes (the standard library's HTML parser)."""
    from html.parser import HTMLParser

    found: list[tuple[str, list[tuple[str, str | None]]]] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.append((tag, attrs))

    Collect().feed(html)
    return found


def test_a_live_card_names_the_server_and_escapes_its_words(comms: list[tuple[str, str]]) -> None:
    from notebook_llm.api.tool_calling.events import ToolOutcome, ToolRun
    from notebook_llm.notebook.widgets.stream_view import StreamView

    view = StreamView("mock:tools")
    view.handle(ToolRun("c1", "get_time", "{}", source="mcp:time"))
    view.handle(ToolOutcome("c1", "get_time", "<img src=x onerror=alert(1)>", source="mcp:time"))
    view.flush()
    html = view._cards_by_id["c1"].html()
    assert "mcp:time" in html
    assert not [tag for tag, _ in _elements(html) if tag == "img"]
