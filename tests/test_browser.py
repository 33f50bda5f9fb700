"""Real-browser test: JupyterLab on 127.0.0.1 + headless Chromium (Debian's) through Playwright.

Opens ``notebooks/quickstart.ipynb`` (a copy, in a temporary root dir), runs all cells, checks in
the page that the live views rendered as widgets (streamed text, a tool-call card) and not as
"Loading widget..." or an error, and takes the screenshots shown in the README. They are written
to ``docs/`` only with ``NOTEBOOK_LLM_UPDATE_SCREENSHOTS=1`` (a test run must not change tracked
files); otherwise to a temporary folder, printed on failure.

Chromium comes from ``scripts/ensure-chromium`` (the test command runs it). When it is missing
this test FAILS with a message saying how to install it; it is never skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "notebooks" / "quickstart.ipynb"
SHOTS = (
    ROOT / "docs"
    if os.environ.get("NOTEBOOK_LLM_UPDATE_SCREENSHOTS") == "1"
    else Path(tempfile.gettempdir()) / "notebook_llm-screenshots"
)
SCREENSHOT = SHOTS / "screenshot.png"
SCREENSHOT_REOPENED = SHOTS / "screenshot-reopened.png"
CHROMIUM = os.environ.get("NOTEBOOK_LLM_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKEN = "notebook-llm-browser-test"

pytestmark = pytest.mark.browser

# JupyterLab user settings for the test: render every cell (no windowing, so outputs of cells
# below the fold exist in the DOM) and no news / update toasts over the screenshot.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"JupyterLab exited early:\n{log.read_text(errors='replace')[-4000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.3)
    pytest.fail(f"JupyterLab did not answer within {timeout}s:\n{log.read_text()[-4000:]}")


def _serve(tmp_path: Path, app: str) -> Iterator[str]:
    """A JupyterLab (``app="jupyterlab"``) or Notebook 7 (``app="notebook"``) server with the
    quickstart in its root; yields the base URL."""
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(QUICKSTART, root / "quickstart.ipynb")
    settings = tmp_path / "lab-user-settings"
    for name, value in LAB_SETTINGS.items():
        plugin, file = name.rsplit("/", 1)
        target = settings / plugin / file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(value), encoding="utf-8")
    port = _free_port()
    env = dict(os.environ)
    (tmp_path / "config.toml").write_text("")  # empty: a missing named file is warned of
    env.update(
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        NOTEBOOK_LLM_CONFIG=str(tmp_path / "config.toml"),
        NOTEBOOK_LLM_ADAPTERS_DIR=str(tmp_path / "adapters"),
        PYTHONWARNINGS="ignore",
    )
    app_args = (
        [
            "--LabApp.news_url=",
            "--LabServerApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
        if app == "jupyterlab"
        else []
    )
    log = tmp_path / f"{app}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                app,
                "--no-browser",
                *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={TOKEN}",
                f"--ServerApp.root_dir={root}",
                *app_args,
            ],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(f"{base}/api/status?token={TOKEN}", proc, log)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[str]:
    """A JupyterLab server with the quickstart in its root; yields the base URL."""
    yield from _serve(tmp_path, "jupyterlab")


def _browser_or_fail() -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"Chromium is not installed at {CHROMIUM}: run `bash scripts/ensure-chromium` "
            "(apt-get install chromium) or set NOTEBOOK_LLM_CHROMIUM to a Chromium binary"
        )
    try:
        import playwright  # noqa: F401
    except ImportError:
        pytest.fail("the Playwright Python package is missing: pip install playwright")


_STATE_JS = """() => {
  const cells = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')];
  const prompts = cells.map(c => (c.querySelector('.jp-InputPrompt')?.innerText || '').trim());
  return {n: cells.length, prompts};
}"""


SLOW_SETUP = "from notebook_llm.adapters.mock.shared import shared_server; shared_server().chunk_delay = 0.05"
TOOL_CELL = "%%llm mock:tools --tools get_weather\n{city}"
SLOW_CELL = "%%llm mock:lorem --max-tokens 600\nStream this slowly, please."


def _wait_all_done(page: Any, timeout: float) -> None:
    """Until every code cell has run (an ``[n]:`` prompt, none ``[*]``)."""
    deadline = time.monotonic() + timeout
    state: dict[str, Any] = {}
    while time.monotonic() < deadline:
        state = page.evaluate(_STATE_JS)
        prompts = [p for p in state["prompts"] if p and p != "[ ]:"]  # "[ ]": never run
        if prompts and all(p.startswith("[") and p[1:-2].isdigit() for p in prompts):
            return
        time.sleep(0.2)
    pytest.fail(f"cells did not finish running within {timeout}s: {state}")


def _add_cell(page: Any, source: str) -> None:
    """Append a code cell at the end of the notebook, type ``source`` and run it."""
    last = page.locator(".jp-Notebook .jp-Cell").last
    reuse = (
        "jp-CodeCell" in (last.get_attribute("class") or "")
        and not last.locator(".jp-InputArea-editor").inner_text().strip()
    )
    last.click()
    page.keyboard.press("Escape")
    if not reuse:  # Shift+Enter on the last cell already added an empty one: use it
        page.keyboard.press("b")
    page.keyboard.press("Enter")
    for i, line in enumerate(source.split("\n")):
        if i:
            page.keyboard.press("Enter")
        page.keyboard.type(line)
    page.keyboard.press("Shift+Enter")


def _assert_static_outputs(page: Any, min_footers: int = 8) -> None:
    """The quickstart's outputs as a reader without widgets sees them."""
    outputs = page.locator(".jp-Notebook .jp-OutputArea-output")
    all_text = "\n".join(outputs.all_inner_texts())
    assert "Loading widget" not in all_text, "a widget reference was saved"
    assert "Error displaying widget" not in all_text, all_text[:2000]
    card = page.locator(".jp-OutputArea-output .notebook-llm-tool", has_text="get_weather")
    assert card.count() >= 1, "no tool-call card"
    assert card.first.is_visible()
    assert '{"city": "Lisbon"}' in card.first.inner_text()  # the arguments
    assert "sunny in Lisbon" in card.first.inner_text()  # the result
    footers = page.locator(".jp-OutputArea-output .notebook-llm-footer")
    assert footers.count() >= min_footers, f"{footers.count()} footers"
    assert footers.first.is_visible()
    assert "cut at max tokens" in all_text
    assert all_text.count("Reasoning") == 1  # the collapsed reasoning, once


def _api(base: str, path: str, method: str = "GET") -> Any:
    request = urllib.request.Request(f"{base}{path}?token={TOKEN}", method=method)
    with urllib.request.urlopen(request, timeout=10) as resp:
        body = resp.read()
    return json.loads(body) if body else None


def _wait_kernel_idle(base: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            kernels = _api(base, "/api/kernels")
        except urllib.error.HTTPError:  # the server answers 500 while a kernel starts
            kernels = None
        if kernels and all(k.get("execution_state") == "idle" for k in kernels):
            return
        time.sleep(0.3)
    pytest.fail(f"no idle kernel within {timeout}s")


def _shutdown_kernels(base: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            for session in _api(base, "/api/sessions"):
                _api(base, f"/api/sessions/{session['id']}", method="DELETE")
            kernels = _api(base, "/api/kernels")
            for kernel in kernels:
                _api(base, f"/api/kernels/{kernel['id']}", method="DELETE")
            if not kernels:
                return
        except urllib.error.HTTPError:  # a session and its kernel going at the same time
            pass
        time.sleep(0.3)
    pytest.fail(f"kernels still running after {timeout}s")


@contextlib.contextmanager
def _chromium_page() -> Iterator[Any]:
    """A 1280x900 page in headless Chromium, closed with its browser."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser.new_page(viewport={"width": 1280, "height": 900})
        finally:
            browser.close()


def _notebook_url(base: str, name: str, app: str) -> str:
    """The URL of notebook ``name`` in JupyterLab or Notebook 7."""
    where = "lab/tree" if app == "jupyterlab" else "notebooks"
    return f"{base}/{where}/{name}?token={TOKEN}"


def _open(page: Any, url: str) -> None:
    page.goto(url, timeout=90_000)
    page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=90_000)


def _run_all_and_save(page: Any, base: str, path: Path) -> None:
    _wait_kernel_idle(base)
    page.wait_for_timeout(1000)  # the front end's own kernel connection
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    page.locator(".lm-Menu-item", has_text="Run All Cells").first.click()
    _wait_all_done(page, 120)
    page.wait_for_timeout(1000)
    before = path.stat().st_mtime_ns
    page.locator(".jp-Notebook .jp-Cell").first.click()
    page.keyboard.press("Escape")
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + 30
    while path.stat().st_mtime_ns == before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert path.stat().st_mtime_ns != before, "the notebook was not saved"


def _reopen_checks(page: Any, base: str, url: str, root: Path, app: str) -> None:
    """Save after running; reopen with a fresh kernel, then with none: static outputs only."""
    saved = root / "quickstart.ipynb"
    _open(page, url)
    _run_all_and_save(page, base, saved)
    text = saved.read_text(encoding="utf-8")
    assert "application/vnd.jupyter.widget-view+json" not in text
    assert "notebook-llm-footer" in text

    # A fresh kernel: the old one is gone (as after a restart or the next morning).
    _shutdown_kernels(base)
    _open(page, url)
    _wait_kernel_idle(base)
    page.wait_for_timeout(1500)  # would-be widget views get the time to fail
    _assert_static_outputs(page)

    # No kernel at all: the same file with a kernel that does not exist here.
    _shutdown_kernels(base)
    nb = json.loads(text)
    nb["metadata"]["kernelspec"] = {
        "name": "no-such-kernel",
        "display_name": "None",
        "language": "none",
    }
    nb["metadata"].pop("language_info", None)
    (root / "nokernel.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    # ``reset``: a fresh JupyterLab workspace, which does not reopen the quickstart's tab.
    _open(page, url.replace("quickstart.ipynb", "nokernel.ipynb") + "&reset")
    page.wait_for_timeout(2000)
    dialog = page.locator(".jp-Dialog")
    if dialog.count():
        no_kernel = dialog.locator("button", has_text="No Kernel")
        if no_kernel.count():
            no_kernel.first.click()
        else:
            page.keyboard.press("Escape")
    page.wait_for_timeout(1500)
    assert not _api(base, "/api/kernels"), "a kernel was started"
    _assert_static_outputs(page)
    if app == "jupyterlab":
        page.keyboard.press("Control+b")  # hide the file browser: a wider notebook
        page.locator(".jp-CodeCell", has_text="--tools get_weather").last.evaluate(
            "cell => cell.scrollIntoView({block: 'start'})"
        )
        page.wait_for_timeout(300)
        SCREENSHOT_REOPENED.parent.mkdir(parents=True, exist_ok=True)
        # (the bytes taken here are checked, not the shared file another run may rewrite)
        shot = page.screenshot(path=str(SCREENSHOT_REOPENED))
        assert len(shot) > 10_000


@pytest.mark.parametrize("app", ["jupyterlab", "notebook"])
def test_a_saved_notebook_reopens_without_widgets(tmp_path: Path, app: str) -> None:
    _browser_or_fail()
    server = _serve(tmp_path, app)
    base = next(server)
    try:
        root = tmp_path / "root"
        url = _notebook_url(base, "quickstart.ipynb", app)
        with _chromium_page() as page:
            _reopen_checks(page, base, url, root, app)
    finally:
        server.close()


def test_nbconvert_html_shows_the_card_offline(tmp_path: Path) -> None:
    """The committed quickstart as nbconvert HTML, opened with every network request refused."""
    _browser_or_fail()
    html_path = tmp_path / "quickstart.html"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "nbconvert",
            "--to",
            "html",
            "--output-dir",
            str(tmp_path),
            str(QUICKSTART),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    with _chromium_page() as page:
        page.route(
            "**/*",
            lambda route: (
                route.continue_() if route.request.url.startswith("file:") else route.abort()
            ),
        )
        page.goto(html_path.as_uri())
        card = page.locator(".notebook-llm-tool", has_text="get_weather")
        assert card.count() >= 1
        assert card.first.is_visible()
        assert "sunny in Lisbon" in card.first.inner_text()
        assert page.locator(".notebook-llm-footer").first.is_visible()
        body = page.inner_text("body")
        assert "Loading widget" not in body


#: An answer and a provider error message that try every way out: math carrying a link and a
#: style, images, javascript: links in several spellings, raw HTML, a box-ending \\r\\r.
HOSTILE_ANSWER = (
    "Math: $\\href{javascript:window.__nbllm_xss=1}{mathlink}$ "
    "$\\style{background:url(nbllm-leak-style.png)}{styled}$ "
    "$$\\class{mathjax_process}{\\unicode{x41}}$$ \\(\\url{javascript:window.__nbllm_xss=2}\\)\n\n"
    "![leak](http://127.0.0.1:9/nbllm-leak-image.png) <img src=http://127.0.0.1:9/nbllm-leak-raw.png>"
    " [a](javascript:window.__nbllm_xss=3) [b](jav&#97;script:window.__nbllm_xss=4)"
    " <javascript:window.__nbllm_xss=5>\n\n```python\nif a < b:\n    pass\n```\n"
)
HOSTILE_ERROR = (
    "upstream said\r\r![e](http://127.0.0.1:9/nbllm-leak-error.png)\n\n</div>"
    "<img src=http://127.0.0.1:9/nbllm-leak-error2.png onerror=window.__nbllm_xss=6>"
    "[x](javascript:window.__nbllm_xss=7) $\\href{javascript:window.__nbllm_xss=8}{errmath}$"
)


def test_nbconvert_html_typesets_no_math_and_fetches_nothing_from_an_answer(
    tmp_path: Path,
) -> None:
    """A final output and an error box holding HOSTILE_ANSWER / HOSTILE_ERROR, exported by
    nbconvert and opened in Chromium with MathJax 2 (local files, without its Safe extension:
    the worst case). A Markdown cell's math is typeset (MathJax ran), and so is the same
    sanitized answer shown without the wrapper (what the wrapper stops: a javascript: link out
    of \\href); nothing in our outputs is typeset, no javascript: link exists, and no request
    leaves the page but nbconvert's own template's."""
    import jupyter_server_mathjax
    import nbformat
    from nbconvert import HTMLExporter

    from notebook_llm.core.errors import ErrorCode, LlmError
    from notebook_llm.notebook.widgets.final import FinalView
    from notebook_llm.notebook.widgets.render import ErrorBox
    from notebook_llm.notebook.widgets.safe_html import markdown_html

    _browser_or_fail()
    mathjax = Path(jupyter_server_mathjax.__file__).parent / "static" / "MathJax.js"
    box = ErrorBox(LlmError(HOSTILE_ERROR, ErrorCode.INVALID_REQUEST, provider="openai"))
    final = FinalView(HOSTILE_ANSWER, error=box, footer="openai:m · error")
    nb = nbformat.v4.new_notebook()
    code = nbformat.v4.new_code_cell("%%llm\nhi")
    code.outputs = [
        nbformat.v4.new_output("display_data", data=final._repr_mimebundle_()),
        nbformat.v4.new_output("display_data", data=box._repr_mimebundle_()),
    ]
    control = nbformat.v4.new_code_cell("control")
    unwrapped = markdown_html(HOSTILE_ANSWER.replace("nbllm-leak", "nbllm-control"))
    control.outputs = [  # sanitized, but not wrapped: MathJax reads it
        nbformat.v4.new_output("display_data", data={"text/html": unwrapped})
    ]
    nb.cells = [nbformat.v4.new_markdown_cell("Control: $x^2$"), code, control]
    exporter = HTMLExporter()
    exporter.mathjax_url = mathjax.as_uri() + "?config=TeX-AMS-MML_HTMLorMML-full"
    html_path = tmp_path / "hostile.html"
    html_path.write_text(exporter.from_notebook_node(nb)[0], encoding="utf-8")
    with _chromium_page() as page:
        requests: list[str] = []
        page.on("request", lambda req: requests.append(req.url))
        page.route(
            "**/*",
            lambda route: (
                route.continue_() if route.request.url.startswith("file:") else route.abort()
            ),
        )
        page.goto(html_path.as_uri())
        # MathJax typesets the page in document order: once the control (the last cell) is
        # done, it has been over our outputs too.
        page.wait_for_function(
            "() => document.querySelectorAll('.jp-MarkdownCell .MathJax').length > 0 &&"
            " document.querySelectorAll('.jp-CodeCell')[1].querySelectorAll('.MathJax').length"
            " >= 3",
            timeout=30_000,
        )
        page.wait_for_timeout(500)
        state = page.evaluate(
            """() => {
              const ours = [...document.querySelectorAll(".notebook-llm-final, .notebook-llm-output")];
              const links = (root) => [...root.querySelectorAll("a[href]")].filter((a) =>
                !["http:", "https:", "mailto:", "file:"].includes(a.protocol));
              const control = document.querySelectorAll(".jp-CodeCell")[1];
              return {
                ours: ours.length,
                typeset: ours.map((o) => o.querySelectorAll(".MathJax, script").length),
                badLinks: ours.map((o) => links(o).length),
                images: ours.map((o) => o.querySelectorAll("img, [style*=url]").length),
                text: ours.map((o) => o.innerText).join(" "),
                controlTypeset: control.querySelectorAll(".MathJax").length,
                controlStyleUrls: control.querySelectorAll("[style*='url(']").length,
                controlJsLinks: links(control).length,
                xss: window.__nbllm_xss ?? null,
              };
            }"""
        )
    assert state["ours"] == 2
    assert state["typeset"] == [0, 0], state
    assert state["badLinks"] == [0, 0], state
    assert state["images"] == [0, 0], state
    assert "$\\href{javascript:window.__nbllm_xss=1}{mathlink}$" in state["text"]  # as source
    assert "$\\href{javascript:window.__nbllm_xss=8}{errmath}$" in state["text"]
    assert "image: leak" in state["text"]
    # Without the wrapper MathJax would have typeset the answer: a javascript: link out of
    # \\href, and a CSS url() (a request, once the browser paints it) out of \\style.
    assert state["controlTypeset"] >= 3, state
    assert state["controlJsLinks"] >= 1, state
    assert state["controlStyleUrls"] >= 1, state
    assert state["xss"] is None
    outside = [u for u in requests if not u.startswith("file:") and "nbllm-control" not in u]
    assert not [u for u in outside if "nbllm" in u or "127.0.0.1" in u], outside
    # what is left is the template's own require.js (refused here), nothing of ours
    assert all(u.endswith("/require.min.js") for u in outside), outside


def test_quickstart_renders_live_widgets_in_jupyterlab(lab: str) -> None:
    _browser_or_fail()
    with _chromium_page() as page:
        page.goto(_notebook_url(lab, "quickstart.ipynb", "jupyterlab"), timeout=90_000)
        page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=90_000)
        # The kernel must be up before "Run All"; the status bar says Idle.
        page.wait_for_function("() => document.body.innerText.includes('Idle')", timeout=90_000)
        page.locator(".lm-MenuBar-item", has_text="Run").first.click()
        page.locator(".lm-Menu-item", has_text="Run All Cells").first.click()

        _wait_all_done(page, 120)
        page.wait_for_timeout(1500)  # let the last widget views render

        outputs = page.locator(".jp-Notebook .jp-OutputArea-output")
        all_text = "\n".join(outputs.all_inner_texts())
        assert "Loading widget" not in all_text, "a widget view never rendered"
        assert "Error displaying widget" not in all_text, all_text[:2000]
        assert "Traceback" not in all_text, all_text[:4000]
        # Every finished turn replaced its live view by one static output: the tool-call
        # card (name, arguments, result) and a footer per turn, and no widget left.
        _assert_static_outputs(page)
        assert page.locator(".notebook-llm-view").count() == 0
        assert page.locator(".notebook-llm-error").count() == 0

        # Watch a long answer stream live, at the mock's own pace where someone watches (no
        # hidden setting): the text must appear inside the widget view while the cell runs,
        # and the screenshot shows it mid-way, with its Stop button.
        page.keyboard.press("Control+b")  # hide the file browser: a wider notebook
        _add_cell(page, TOOL_CELL)
        _wait_all_done(page, 120)
        _add_cell(page, SLOW_CELL)
        live = page.locator(".notebook-llm-view .notebook-llm-live", has_text="Lorem ipsum")
        live.first.wait_for(timeout=90_000)  # streamed text, in the live widget
        running = page.locator(".jp-CodeCell", has_text="Stream this slowly").last
        assert "[*]" in running.locator(".jp-InputPrompt").inner_text()
        page.wait_for_timeout(2500)
        page.locator(".jp-CodeCell", has_text="--tools get_weather").last.evaluate(
            "cell => cell.scrollIntoView({block: 'start'})"
        )
        page.wait_for_timeout(300)
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        # (the bytes taken here are checked, not the shared file another run may rewrite)
        shot = page.screenshot(path=str(SCREENSHOT))

        assert running.locator(".notebook-llm-view button", has_text="Stop").is_visible()
        _wait_all_done(page, 120)
    assert len(shot) > 10_000


@pytest.mark.parametrize("how", ["stop button", "kernel interrupt"])
def test_stop_ends_the_stream_in_jupyterlab(lab: str, how: str) -> None:
    _browser_or_fail()
    with _chromium_page() as page:
        page.goto(_notebook_url(lab, "quickstart.ipynb", "jupyterlab"), timeout=90_000)
        page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=90_000)
        page.wait_for_function("() => document.body.innerText.includes('Idle')", timeout=90_000)
        _add_cell(page, "%load_ext notebook_llm")
        _add_cell(page, SLOW_SETUP)
        _add_cell(page, SLOW_CELL)
        running = page.locator(".jp-CodeCell", has_text="Stream this slowly").last
        page.locator(
            ".notebook-llm-view .notebook-llm-live", has_text="Lorem ipsum"
        ).first.wait_for(timeout=90_000)
        if how == "stop button":
            running.locator(".notebook-llm-view button", has_text="Stop").click()
        else:
            page.keyboard.press("Escape")  # command mode: "i, i" interrupts the kernel
            page.keyboard.press("i")
            page.keyboard.press("i")
        _wait_all_done(page, 120)
        # 600 tokens at 50 ms take 30 s, and an answer that ran to its end is not marked
        # [stopped]: the mark shows the Stop ended the stream (how fast is not asserted here,
        # where the machine's load decides it; bench/bench_lua_stop.py measures it).
        assert "[stopped]" in running.locator(".jp-Cell-outputArea").inner_text()


#: live_view.js driven by a stand-in anywidget model, fed one Markdown block per case: resolves
#: to what each case left in the page (elements that run or fetch, links that are not http,
#: https, mailto or relative, and the image links).
_PANE_JS = """async ([viewSource, markedSource, purifySource, cases]) => {
  const url = URL.createObjectURL(new Blob([viewSource], {type: "text/javascript"}));
  const view = (await import(url)).default;
  const handlers = [];
  const lib = { get: (k) => ({ source: markedSource, purify: purifySource })[k] };
  const model = {
    get: (k) => ({ key: "pane-1", lib: "lib-1", label: "mock:echo" })[k],
    on: (name, cb) => handlers.push(cb),
    widget_manager: { get_model: async () => lib },
  };
  view.initialize({ model });
  const el = document.createElement("div");
  document.body.append(el);
  view.render({ model, el });
  for (let i = 0; i < 100 && !el.querySelector(".notebook-llm-md"); i++) {
    for (const cb of handlers) cb([["+", "probe", "md"], ["probe", "*x*"]]);
    await new Promise((r) => setTimeout(r, 50));
  }
  for (let i = 0; i < 100 && !el.querySelector(".notebook-llm-md em"); i++) {
    await new Promise((r) => setTimeout(r, 50));  // marked and DOMPurify are loaded
  }
  const found = {};
  let n = 0;
  for (const [name, md] of Object.entries(cases)) {
    const id = "case-" + n++;
    for (const cb of handlers) cb([["+", id, "md"], [id, md]]);
    const node = [...el.querySelectorAll(".notebook-llm-md")].pop();
    const scheme = (a) => new URL(a.getAttribute("href"), "https://relative.invalid/").protocol;
    found[name] = {
      elements: node.querySelectorAll(
        "img, script, iframe, svg, math, style, form, object, embed, [onerror], [onclick], " +
        "[onload], [style], [src], [srcset]").length,
      badLinks: [...node.querySelectorAll("a[href]")].map(scheme)
        .filter((p) => !["http:", "https:", "mailto:"].includes(p)),
      imageLinks: [...node.querySelectorAll("a")].filter(
        (a) => a.textContent.startsWith("image: ")).length,
    };
  }
  return { found, xss: window.__nbllm_xss ?? null, html: el.innerHTML.length };
}"""

#: Markdown for the live pane beyond INERT_TRICKS: link targets in every spelling, images,
#: raw HTML (which marked hands over as tokens that live_view.js escapes), entities, math.
PANE_TRICKS = {
    "raw html": '<img src="x" onerror="window.__nbllm_xss = 1"> <script>window.__nbllm_xss=2</script>',
    "raw html block": "<div>\n<img src=x onerror=window.__nbllm_xss=3>\n</div>",
    "svg": "<svg onload=window.__nbllm_xss=4><script>window.__nbllm_xss=5</script></svg>",
    "javascript link": "[a](javascript:window.__nbllm_xss=6)",
    "tab in the scheme": "[a](java\tscript:window.__nbllm_xss=7)",
    "character reference": "[a](jav&#97;script:window.__nbllm_xss=8)",
    "entity colon": "[a](javascript&colon;window.__nbllm_xss=9)",
    "percent encoded": "[a](%6Aavascript:window.__nbllm_xss=10)",
    "leading control": "[a](&#1;javascript:window.__nbllm_xss=11)",
    "autolink": "<javascript:window.__nbllm_xss=12>",
    "reference": "[a]\n\n[a]: javascript:window.__nbllm_xss=13",
    "data link": "[a](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "data image": "![d](data:image/png;base64,iVBORw0KGgo=)",
    "data svg image": "![d](data:image/svg+xml,%3Csvg%20onload=alert(1)%3E)",
    "remote image": "![leak](https://evil.example/pane.png?q=secret)",
    "image that looks like data": "![probe](d&#1;ata:image/png;x/../../evil.example/p.png)",
    "reference image": "![r][ref]\n\n[ref]: https://evil.example/ref.png",
    "image in a link": "[![b](https://evil.example/b.png)](https://ok.example)",
    "html entities": "&lt;img src=x onerror=window.__nbllm_xss=14&gt; &#60;script&#62;",
    "math": "$\\href{javascript:window.__nbllm_xss=15}{m}$ $\\style{color:red}{x}$",
    "nested emphasis": "***[a](javascript:window.__nbllm_xss=16)***" * 50,
    "table": "| a |\n|---|\n| <img src=x onerror=window.__nbllm_xss=17> [b](javascript:x) |",
    "task list": "- [x] done\n- [ ] <input type=text autofocus onfocus=window.__nbllm_xss=18>",
}


def test_no_markdown_trick_renders_an_element_in_the_live_pane() -> None:
    """live_view.js with the vendored marked and DOMPurify, in Chromium, fed each Markdown
    trick: no element that runs or fetches, no link but http(s)/mailto/relative, every image a
    link (never loaded), and no request to the answer's URLs."""
    from live_view_support import INERT_TRICKS

    from notebook_llm.notebook.widgets import render

    _browser_or_fail()
    static = Path(render.__file__).parent / "static"
    sources = [
        (static / name).read_text()
        for name in ("live_view.js", "marked.esm.js", "dompurify.esm.js")
    ]
    cases = {**INERT_TRICKS, **PANE_TRICKS}
    with _chromium_page() as page:
        requests: list[str] = []
        page.on("request", lambda req: requests.append(req.url))
        page.set_content("<html><body></body></html>")
        result = page.evaluate(_PANE_JS, [*sources, cases])
        page.wait_for_timeout(500)
    found = result["found"]
    assert result["xss"] is None
    assert {name: f["elements"] for name, f in found.items()} == dict.fromkeys(cases, 0)
    assert {name: f["badLinks"] for name, f in found.items()} == {n: [] for n in cases}
    for name in ("remote image", "image that looks like data", "reference image", "data image"):
        assert found[name]["imageLinks"] == 1, name
    assert found["image in a link"]["imageLinks"] >= 1  # the outer link holds it too
    assert not [u for u in requests if "evil.example" in u], requests
    assert all(u.startswith("blob:") or u == "about:blank" for u in requests), requests


#: live_view.js driven by a stand-in anywidget model: the ops it is sent come in as custom
#: messages; resolves to the arguments text of the first tool card after each batch of ops,
#: and whether anything of the arguments became an element.
_CARD_JS = """async ([viewSource, markedSource, purifySource, batches]) => {
  const url = URL.createObjectURL(new Blob([viewSource], {type: "text/javascript"}));
  const view = (await import(url)).default;
  const handlers = [];
  const lib = { get: (k) => ({ source: markedSource, purify: purifySource })[k] };
  const model = {
    get: (k) => ({ key: "pane-1", lib: "lib-1", label: "mock:tools" })[k],
    on: (name, cb) => handlers.push(cb),
    widget_manager: { get_model: async () => lib },
  };
  view.initialize({ model });
  const el = document.createElement("div");
  document.body.append(el);
  view.render({ model, el });
  const seen = [];
  for (const ops of batches) {
    for (const cb of handlers) cb(ops);
    const pre = el.querySelector(".notebook-llm-tool pre");
    seen.push(pre ? pre.textContent : null);
  }
  return { seen, elements: el.querySelectorAll("img, script, [onerror]").length,
           xss: window.__nbllm_xss ?? null };
}"""


def test_a_tool_cards_streamed_arguments_are_appended_as_text_in_the_browser(
    comms: list[tuple[str, str]],
) -> None:
    """The ops a StreamView sends for a tool call, applied by live_view.js in Chromium: the
    card shows every argument delta, appended as text (markup in them stays text), and the
    card of the finished call replaces what was appended."""
    from live_view_support import Clock, feed_tool_call, pane_ops

    from notebook_llm.notebook.widgets import render
    from notebook_llm.notebook.widgets.stream_view import StreamView

    _browser_or_fail()
    pieces = ['{"path": "a.html", "content": "', "<img src=x onerror=window.__nbllm_xss=1>"]
    pieces += [f"line {i} " for i in range(300)] + ['"}']
    clock = Clock()
    view = StreamView("mock:tools", clock=clock)
    feed_tool_call(view, clock, pieces, dt=0.05)
    view.flush(final=True)
    ops = pane_ops(comms)
    last_card = max(i for i, op in enumerate(ops) if op[0] == "=")
    batches = [ops[:last_card], ops[last_card:]]  # while the call streams; after its end
    static = Path(render.__file__).parent / "static"
    sources = [
        (static / name).read_text()
        for name in ("live_view.js", "marked.esm.js", "dompurify.esm.js")
    ]
    with _chromium_page() as page:
        page.set_content("<html><body></body></html>")
        found = page.evaluate(_CARD_JS, [*sources, batches])
    arguments = "".join(pieces)
    streaming, done = found["seen"]
    card = next(op[1] for op in ops if op[0] == "+" and op[2] == "card")
    assert sum(op[0] == card for op in batches[0]) > 10  # argument text, appended
    assert len(streaming) > 0.9 * len(arguments)  # nearly all of it, before the end
    assert arguments.startswith(streaming)  # in order, each piece once
    assert done == arguments
    assert (found["elements"], found["xss"]) == (0, None)


# ------------------------------------------------------------------ live Markdown (issue 16)

#: An answer (echoed back by mock:echo) with Markdown, then raw HTML and a javascript: link that
#: must not run, then enough words that the stream lasts a few seconds at 50 ms a token.
LIVE_MD = (
    "# Live title\n\nSome **bold words** and `inline code`.\n\n"
    "```python\nx = 1\n```\n\n"
    '<img src="x" onerror="window.__nbllm_xss = 1"> <script>window.__nbllm_xss = 2</script> '
    "[a link](javascript:window.__nbllm_xss=3)\n\n"
    "![leak](http://127.0.0.1:9/nbllm-leak.png?q=secret)\n\n"
    "![probe](d&#1;ata:image/png;x/../../../nbllm-leak-probe?q=secret)\n\n"
    "$\\href{javascript:window.__nbllm_xss=4}{mathlink}$ "
    "$\\style{background:url(http://127.0.0.1:9/nbllm-leak-style.png)}{styled}$\n\n"
    + " ".join(["streaming"] * 120)
)
_XSS_JS = """() => ({
  xss: window.__nbllm_xss ?? null,
  handlers: [...document.querySelectorAll('.notebook-llm-live [onerror], .notebook-llm-live script')].length,
  jsLinks: [...document.querySelectorAll('.notebook-llm-live a')].filter(
    a => (a.getAttribute('href') || '').toLowerCase().includes('javascript')).length,
})"""


def _live_notebook(root: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext notebook_llm"),
        nbformat.v4.new_code_cell(SLOW_SETUP),
        nbformat.v4.new_code_cell(f"md = {LIVE_MD!r}"),
        nbformat.v4.new_code_cell("%%llm mock:echo\n{md}"),
    ]
    nbformat.write(nb, root / "live.ipynb")


@pytest.mark.parametrize("app", ["jupyterlab", "notebook"])
def test_markdown_renders_live_and_raw_html_never_runs(tmp_path: Path, app: str) -> None:
    """While the answer streams, the live pane shows it as rendered Markdown (a heading, bold,
    a code block); its raw HTML shows as text and runs nothing, its javascript: link is
    dropped, its image is a link that the browser never fetched; at the end the static
    sanitized HTML replaces the pane, with its math not typeset."""
    _browser_or_fail()
    server = _serve(tmp_path, app)
    base = next(server)
    try:
        _live_notebook(tmp_path / "root")
        url = _notebook_url(base, "live.ipynb", app)
        with _chromium_page() as page:
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            leaked: list[str] = []  # the answer's image URL, if the browser ever fetched it
            page.on("request", lambda req: "nbllm-leak" in req.url and leaked.append(req.url))
            _open(page, url)
            _wait_kernel_idle(base)
            page.wait_for_timeout(1000)
            page.locator(".lm-MenuBar-item", has_text="Run").first.click()
            page.locator(".lm-Menu-item", has_text="Run All Cells").first.click()
            live = page.locator(".notebook-llm-live")
            live.locator("h1", has_text="Live title").wait_for(timeout=30_000)
            # Rendered while the cell still runs: the pane is there, the cell is busy.
            running = page.locator(".jp-CodeCell", has_text="mock:echo").last
            assert "[*]" in running.locator(".jp-InputPrompt").inner_text()
            live.locator("strong", has_text="bold words").wait_for(timeout=90_000)
            live.locator("pre code", has_text="x = 1").wait_for(timeout=90_000)
            live.locator(".notebook-llm-md", has_text="streaming streaming").wait_for(
                timeout=90_000
            )  # past the raw HTML and the link
            assert "[*]" in running.locator(".jp-InputPrompt").inner_text()
            text = live.first.inner_text()
            assert '<img src="x" onerror=' in text  # raw HTML is shown as text
            state = page.evaluate(_XSS_JS)
            assert state == {"xss": None, "handlers": 0, "jsLinks": 0}, state
            assert "a link" in live.first.inner_text()  # the text is kept, the URL is not
            # The image is a link to it, not fetched; so is one that only looks like data.
            assert live.locator("a", has_text="image: leak").count() == 1
            assert live.locator("a", has_text="image: probe").count() == 1
            _wait_all_done(page, 120)
            page.wait_for_timeout(1000)
            outputs = "\n".join(
                page.locator(".jp-Notebook .jp-OutputArea-output").all_inner_texts()
            )
            assert "Error displaying widget" not in outputs, outputs[:2000]
            assert page.locator(".notebook-llm-live").count() == 0  # replaced
            final = running.locator(".notebook-llm-final")
            assert final.locator("h1", has_text="Live title").count() == 1
            # JupyterLab typesets HTML outputs too: not this one (its math stays source)
            assert final.locator("mjx-container, .MathJax").count() == 0
            assert "$\\href{javascript:" in final.inner_text()
            assert final.locator("a", has_text="mathlink").count() == 0
            assert final.locator("pre code span").count() > 0  # highlighted
            assert final.locator(".notebook-llm-footer").count() == 1
            assert page.evaluate("() => window.__nbllm_xss ?? null") is None
            assert final.locator("a", has_text="image: leak").count() == 1
            assert leaked == [], leaked  # neither live nor in the final output
            assert not [e for e in errors if "nbllm" in e or "anywidget" in e], errors
    finally:
        server.close()


#: live_view.js fed the ops of a view (as _CARD_JS): resolves to the text of each reasoning
#: block's element after all the ops.
_THINK_JS = """async ([viewSource, markedSource, purifySource, ops]) => {
  const url = URL.createObjectURL(new Blob([viewSource], {type: "text/javascript"}));
  const view = (await import(url)).default;
  const handlers = [];
  const lib = { get: (k) => ({ source: markedSource, purify: purifySource })[k] };
  const model = {
    get: (k) => ({ key: "pane-think", lib: "lib-1", label: "mock:reasoning" })[k],
    on: (name, cb) => handlers.push(cb),
    widget_manager: { get_model: async () => lib },
  };
  view.initialize({ model });
  const el = document.createElement("div");
  document.body.append(el);
  view.render({ model, el });
  for (const op of ops) for (const cb of handlers) cb([op]);
  const box = el.querySelector(".notebook-llm-reasoning div");
  return [...box.children].map((c) => c.textContent);
}"""


def test_each_reasoning_block_shows_all_its_text_in_the_browser(
    comms: list[tuple[str, str]],
) -> None:
    """Interleaved thinking: a later reasoning block shorter than an earlier one still shows
    whole (one counter for every block showed none of it)."""
    from live_view_support import pane_ops

    from notebook_llm.core.protocol import (
        BlockEnd,
        BlockStart,
        Finish,
        ReasoningBlock,
        ReasoningDelta,
        TextBlock,
        TextDelta,
    )
    from notebook_llm.notebook.widgets import render
    from notebook_llm.notebook.widgets.stream_view import StreamView

    _browser_or_fail()
    first, second = "a long first thought " * 10, "second"
    view = StreamView("mock:reasoning")
    for event in [
        BlockStart(0, "reasoning"),
        ReasoningDelta(0, first),
        BlockEnd(0, ReasoningBlock(first)),
        BlockStart(1, "text"),
        TextDelta(1, "Text. "),
        BlockEnd(1, TextBlock("Text. ")),
        BlockStart(2, "reasoning"),
        ReasoningDelta(2, second),
        BlockEnd(2, ReasoningBlock(second)),
        Finish.stop(),
    ]:
        view.handle(event)
        view.flush()
    view.flush(final=True)
    static = Path(render.__file__).parent / "static"
    sources = [
        (static / name).read_text()
        for name in ("live_view.js", "marked.esm.js", "dompurify.esm.js")
    ]
    with _chromium_page() as page:
        page.set_content("<html><body></body></html>")
        shown = page.evaluate(_THINK_JS, [*sources, pane_ops(comms)])
    assert shown == [first, second]
