"""Redaction knows URL credentials and signed-URL parameters, and every text that reaches a
cell, a file or a log passes it: an adapter's error box, a log record, ``str(completion)``."""

from __future__ import annotations

import logging

import pytest

from notebook_llm.core.completion import Completion
from notebook_llm.core.errors import ErrorCode, LlmError
from notebook_llm.core.protocol import TextBlock
from notebook_llm.core.redaction import is_credential_name, redact, register_secret

SIGNED = (
    "https://bucket.s3.amazonaws.com/cat.png?X-Amz-Algorithm=AWS4-HMAC-SHA256"
    "&X-Amz-Credential=AKIAEXAMPLE%2F20260101%2Fus-east-1&X-Amz-Date=20260101T000000Z"
    "&X-Amz-Expires=900&X-Amz-Security-Token=FwoGZXIvYXdzEXAMPLE&X-Amz-Signature=5d672d79c15b"
)
SECRETS_IN_URLS = [
    ("https://alice:hunter2@img.example.com/a.png", ["hunter2", "alice"]),
    (SIGNED, ["AKIAEXAMPLE", "FwoGZXIvYXdzEXAMPLE", "5d672d79c15b"]),
    (
        "https://storage.googleapis.com/b/o.png?X-Goog-Signature=abcdef0123&X-Goog-Credential=svc%40p",
        ["abcdef0123", "svc%40p"],
    ),
    ("https://acct.blob.core.windows.net/c/b.png?sv=2024-01-01&sp=r&sig=AzureSig%3D", ["AzureSig"]),
    (
        "https://cdn.example.com/i.png?Policy=eyJ&Signature=CloudFrontSig&Key-Pair-Id=K2",
        ["CloudFrontSig"],
    ),
    ("https://x.example.com/i.png?accessToken=tok123&client_secret=sec456", ["tok123", "sec456"]),
]


@pytest.mark.parametrize(("url", "hidden"), SECRETS_IN_URLS)
def test_url_credentials_and_signatures_are_hidden(url: str, hidden: list[str]) -> None:
    shown = redact(f"could not fetch image {url}: 403")
    for secret in hidden:
        assert secret not in shown
    assert "could not fetch image https://" in shown  # the rest stays readable


def test_what_is_not_a_credential_stays() -> None:
    text = f"{SIGNED} and https://example.com/?page=2&monkey=1&q=cats"
    shown = redact(text)
    for kept in (
        "X-Amz-Date=20260101T000000Z",
        "X-Amz-Expires=900",
        "page=2",
        "monkey=1",
        "q=cats",
    ):
        assert kept in shown


@pytest.mark.parametrize(
    ("name", "credential"),
    [
        ("X-Amz-Signature", True),
        ("x-amz-credential", True),
        ("sig", True),
        ("apiKey", True),
        ("access_token", True),
        ("clientSecret", True),
        ("password", True),
        ("page", False),
        ("monkey", False),
        ("X-Amz-Date", False),
        ("signal", False),
    ],
)
def test_credential_names(name: str, credential: bool) -> None:
    assert is_credential_name(name) is credential


def test_an_adapter_error_box_hides_an_image_urls_credentials() -> None:
    pytest.importorskip("ipywidgets")
    from notebook_llm.notebook.widgets.render import ErrorBox

    url = "https://alice:hunter2@img.example.com/a.png?X-Amz-Signature=5d672d79c15b&x=1"
    err = LlmError(f"transform_request: cannot read image {url}", ErrorCode.ADAPTER_ERROR)
    html = ErrorBox(err).html()
    assert "hunter2" not in html
    assert "5d672d79c15b" not in html
    assert "img.example.com" in html


def test_a_log_record_with_url_credentials_is_redacted(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("notebook_llm")
    with caplog.at_level(logging.INFO, logger="notebook_llm"):
        logger.info("fetched https://alice:hunter2@img.example.com/a.png")
    assert "hunter2" not in caplog.text
    assert "img.example.com" in caplog.text


def test_str_of_a_completion_redacts_like_repr() -> None:
    register_secret("sk-echoed-key-0123456789")
    c = Completion(blocks=[TextBlock("your key is sk-echoed-key-0123456789 ok")])
    assert "sk-echoed-key-0123456789" not in str(c)
    assert "sk-echoed-key-0123456789" not in repr(c)
    assert "sk-echoed-key-0123456789" in c.text  # the data itself is the model's text
