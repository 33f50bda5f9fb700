"""Each built-in adapter's request for a schema and for an image, against the request shapes the
providers document:

* OpenAI Structured Outputs: ``response_format: {type: json_schema, json_schema: {name, schema,
  strict}}``; images ``{type: image_url, image_url: {url: "data:..."}}``;
* Anthropic JSON outputs: ``output_config: {format: {type: json_schema, schema}}`` (every object
  ``additionalProperties: false``); images ``{type: image, source: {type: base64, media_type,
  data}}``;
* Gemini: ``generationConfig.responseMimeType: application/json`` + ``responseJsonSchema``;
  images ``{inlineData: {mimeType, data}}``;
* Ollama structured outputs: ``format: <schema>``; images ``messages[].images: [base64]``;
* Mistral custom structured outputs: OpenAI's ``response_format`` shape; Groq: the same in
  best-effort mode (``strict: false``); DeepSeek JSON output: ``response_format: {type:
  json_object}`` with the word "json" and the schema in the prompt.

Each goes through the real script's ``transform_request`` in the sandbox, from the kernel request
that :func:`notebook_llm.adapters.lua.kernel_request.build_request` makes.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from notebook_llm.adapters.lua.kernel_request import build_request
from notebook_llm.adapters.lua.runtime import LuaSandbox
from notebook_llm.core.images import image_block
from notebook_llm.core.protocol import GenerateOptions, Message, TextBlock
from notebook_llm.core.response_schema import as_schema

ADAPTERS = Path(__file__).resolve().parent.parent / "adapters"
# A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
PNG_B64 = base64.b64encode(PNG).decode()

SENTIMENT = {
    "title": "Sentiment",
    "type": "object",
    "properties": {
        "label": {"type": "string", "enum": ["positive", "negative", "neutral"]},
        "score": {"type": "number"},
    },
    "required": ["label", "score"],
    "additionalProperties": False,
}
OPEN = {  # no additionalProperties: not strict-compatible
    "type": "object",
    "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {}}},
    "required": ["name"],
}


def transform(adapter: str, options: GenerateOptions) -> dict[str, Any]:
    sandbox = LuaSandbox((ADAPTERS / f"{adapter}.lua").read_text(), name=adapter)
    kernel = json.dumps(build_request(options, stream=True))
    out: dict[str, Any] = json.loads(sandbox.call("transform_request", kernel))
    return out


def with_schema(schema: Any = SENTIMENT) -> GenerateOptions:
    return GenerateOptions(
        provider="p",
        model="m",
        messages=[Message.user("Review: great")],
        response_format=as_schema(schema).response_format(),
    )


def with_image(source: Any = PNG) -> GenerateOptions:
    return GenerateOptions(
        provider="p",
        model="m",
        messages=[Message("user", [TextBlock("What is this?"), image_block(source)])],
    )


def test_kernel_request_carries_the_schema_as_openai_response_format() -> None:
    req = build_request(with_schema(), stream=True)
    assert req["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Sentiment", "schema": SENTIMENT, "strict": True},
    }
    assert (
        build_request(with_schema(OPEN), stream=True)["response_format"]["json_schema"]["strict"]
        is False
    )


def test_kernel_request_carries_an_image_as_the_contract_image_url_block() -> None:
    req = build_request(with_image(), stream=True)
    assert req["messages"][0]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
    ]


@pytest.mark.parametrize("adapter", ["openai", "github", "mistral"])
def test_openai_shape_schema(adapter: str) -> None:
    body = transform(adapter, with_schema())
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Sentiment", "schema": SENTIMENT, "strict": True},
    }


@pytest.mark.parametrize("adapter", ["openai", "github", "mistral", "groq", "deepseek"])
def test_openai_shape_image(adapter: str) -> None:
    body = transform(adapter, with_image())
    assert body["messages"][0]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{PNG_B64}"},
    }


def test_groq_schema_is_best_effort_json_schema() -> None:
    body = transform("groq", with_schema())
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Sentiment", "schema": SENTIMENT, "strict": False},
    }


def test_deepseek_schema_is_json_mode_with_the_schema_in_the_prompt() -> None:
    body = transform("deepseek", with_schema())
    assert body["response_format"] == {"type": "json_object"}
    first = body["messages"][0]
    assert first["role"] == "system"
    assert "json" in first["content"]
    assert json.loads(first["content"].split("\n", 1)[1]) == SENTIMENT
    assert body["messages"][1] == {"role": "user", "content": "Review: great"}


def test_deepseek_schema_note_joins_an_existing_system_prompt() -> None:
    options = with_schema()
    options.system = "Be brief."
    body = transform("deepseek", options)
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][0]["content"].startswith("Be brief.\n\nAnswer with one json object")


def test_anthropic_schema_is_output_config_format() -> None:
    body = transform("anthropic", with_schema(OPEN))
    assert "response_format" not in body
    schema = body["output_config"]["format"]["schema"]
    assert body["output_config"]["format"]["type"] == "json_schema"
    assert schema["additionalProperties"] is False  # required by the API, added when absent
    assert schema["properties"] == OPEN["properties"]
    assert schema["required"] == ["name"]


def test_anthropic_image_is_a_base64_image_block() -> None:
    body = transform("anthropic", with_image())
    assert body["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
    }


def test_anthropic_url_image_is_a_url_source() -> None:
    body = transform("anthropic", with_image("https://example.com/cat.png"))
    assert body["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "url", "url": "https://example.com/cat.png"},
    }


def test_gemini_schema_is_response_mime_type_and_json_schema() -> None:
    body = transform("gemini", with_schema())
    assert "response_format" not in body
    gen = body["generationConfig"]
    assert gen["responseMimeType"] == "application/json"
    assert gen["responseJsonSchema"] == SENTIMENT


def test_gemini_image_is_inline_data() -> None:
    body = transform("gemini", with_image())
    assert body["contents"][0]["parts"][1] == {
        "inlineData": {"mimeType": "image/png", "data": PNG_B64}
    }


def test_ollama_schema_is_format() -> None:
    body = transform("ollama", with_schema())
    assert "response_format" not in body
    assert body["format"] == SENTIMENT


def test_ollama_image_is_in_images() -> None:
    body = transform("ollama", with_image())
    assert body["messages"][0] == {"role": "user", "content": "What is this?", "images": [PNG_B64]}


def test_extra_body_response_format_wins_over_the_schema() -> None:
    options = with_schema()
    options.extra_body = {"response_format": {"type": "json_object"}}
    assert transform("openai", options)["response_format"] == {"type": "json_object"}
