"""Fixtures for the browser tests: a chromium (or Chrome) through Playwright, loopback-only networking."""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import nbformat
import pytest

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
]
ROOT = Path(__file__).resolve().parents[2]
# The built book under test: $COURSE_BOOK_HTML (for example a book built without executing the
# notebooks into another folder), by default book/_build/html.
BOOK_HTML = Path(os.environ.get("COURSE_BOOK_HTML") or ROOT / "book" / "_build" / "html")


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def offline_only(route: Any) -> None:
    """A Playwright route handler: requests to this machine go on, every other is aborted."""
    if is_loopback(route.request.url):
        route.continue_()
    else:
        route.abort()


def is_loopback(url: str) -> bool:
    """Whether a request goes to this machine only (or is inline data)."""
    from urllib.parse import urlparse

    parsed = urlparse(url)
    if parsed.scheme in ("data", "blob", "about"):
        return True
    return parsed.hostname in ("127.0.0.1", "localhost", "::1")


def renders_headless(path: str) -> str:
    """Why the browser at ``path`` cannot render a page headless with the course's flags ('' if it can).

    A path can exist and still not run: on Ubuntu, /usr/bin/chromium-browser is a stub asking for a snap.
    """
    with tempfile.TemporaryDirectory() as profile:
        try:
            done = subprocess.run([path, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                                   "data:text/html,<p>ok</p>"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as err:
            return str(err)
    if "<p>ok</p>" in done.stdout:
        return ""
    return (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1][:200]


def find_browser() -> str:
    """The first browser that renders headless: $COURSE_BROWSER if set (and then only it), Debian's
    chromium, Google Chrome (preinstalled on GitHub's ubuntu-24.04 runners), Playwright's own chromium
    if one was downloaded (``python -m playwright install chromium``). Nothing is downloaded here."""
    if os.environ.get("COURSE_BROWSER"):
        path = shutil.which(os.environ["COURSE_BROWSER"]) or os.environ["COURSE_BROWSER"]
        if why := renders_headless(path):
            pytest.fail(f"COURSE_BROWSER={path} does not run headless: {why}")
        return path
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        playwrights = p.chromium.executable_path
    tried = []
    for path in ("/usr/bin/chromium", "/usr/bin/google-chrome", playwrights):
        if not Path(path).exists():
            continue
        if not (why := renders_headless(path)):
            return path
        tried.append(f"{path} ({why})")
    pytest.skip("no browser runs headless" + (f" (tried {'; '.join(tried)})" if tried else "") +
                ": install Debian's chromium (apt-get install chromium) or Google Chrome, "
                "or set COURSE_BROWSER=/path/to/chrome")


@pytest.fixture(scope="session")
def browser():
    path = find_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def offline_page(browser):
    """A page whose every non-loopback request is aborted; the blocked addresses are in ``page.blocked``."""
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    page = context.new_page()
    page.blocked = []

    def route(r):
        if is_loopback(r.request.url):
            r.continue_()
        else:
            page.blocked.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    yield page
    context.close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep pytest's output clean
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        """A page that navigates on drops its pending requests: not worth a traceback."""
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


@pytest.fixture(scope="session")
def book_server():
    """The built book served over HTTP on a free loopback port."""
    if not (BOOK_HTML / "index.html").exists():
        pytest.fail(f"the book is not built in {BOOK_HTML}: run `bash scripts/build.sh` first")
    server = _QuietServer(
        ("127.0.0.1", free_port()), functools.partial(_QuietHandler, directory=str(BOOK_HTML))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def plan_leaves(data, path: str = "") -> dict:
    """A nested result (PlanResult.as_dict(), or the page's ``__coursePlanner.result``) as
    {dotted path: value}."""
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            out.update(plan_leaves(value, f"{path}.{key}"))
        return out
    return {path: data}


def assert_same_plan(want: dict, got: dict) -> None:
    """The page's plan is Python's: the same keys, every number equal to 1e-12 relative."""
    want, got = plan_leaves(want), plan_leaves(got)
    assert want.keys() == got.keys(), sorted(want.keys() ^ got.keys())
    number = (int, float)
    differ = {k: (want[k], got[k]) for k in want if not (
        want[k] == got[k] or (isinstance(want[k], number) and isinstance(got[k], number)
                              and abs(want[k] - got[k]) <= 1e-12 * abs(want[k])))}
    assert not differ, differ


LAB_TOKEN = "course-test-token"


@contextlib.contextmanager
def jupyterlab(root: Path, home: Path, notebook: str, source: str):
    """A JupyterLab server on a free loopback port, with one notebook holding ``source`` and its kernel started.

    JupyterLab's news question is answered in advance and the kernel is started through the REST
    API, so the notebook opens with no dialog over it. Yields the server's base address.
    """
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(source)],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    nbformat.write(nb, root / notebook)
    settings = home / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(home / "settings"), JUPYTER_CONFIG_DIR=str(home / "config"))
    port = free_port()
    log_path = home / "lab.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ServerApp.port_retries=0",
                "--ServerApp.ip=127.0.0.1", "--allow-root", f"--IdentityProvider.token={LAB_TOKEN}",
                f"--ServerApp.root_dir={root}",
            ],
            stdout=subprocess.DEVNULL, stderr=log, env=env,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(120):
                try:
                    urllib.request.urlopen(f"{url}/api/status?token={LAB_TOKEN}", timeout=1)
                    break
                except OSError:
                    if proc.poll() is not None:
                        pytest.fail("JupyterLab exited:\n" + log_path.read_text()[-3000:])
                    time.sleep(0.5)
            else:
                pytest.fail("JupyterLab did not start within 60 s:\n" + log_path.read_text()[-3000:])
            request = urllib.request.Request(
                f"{url}/api/sessions",
                data=json.dumps({"path": notebook, "type": "notebook", "kernel": {"name": "python3"}}).encode(),
                headers={"Authorization": f"token {LAB_TOKEN}", "Content-Type": "application/json"},
                method="POST",
            )
            urllib.request.urlopen(request, timeout=60)
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=20)


def run_first_cell(page, lab_url: str, notebook: str, ready) -> None:
    """Open a notebook in JupyterLab, run its first cell once the kernel is idle, and wait for ``ready`` to show.

    The cell is run again (up to three times) if the first key press came before the kernel was ready;
    on failure a screenshot is left in $TMPDIR for the person debugging.
    """
    page.goto(f"{lab_url}/lab/tree/{notebook}?token={LAB_TOKEN}")
    cell = page.locator(".jp-Cell .jp-InputArea-editor").first
    cell.wait_for(timeout=60_000)
    page.get_by_text("| Idle").first.wait_for(timeout=60_000)
    for attempt in range(3):
        cell.click()
        page.keyboard.press("Control+Enter")
        try:
            ready.wait_for(timeout=20_000)
            return
        except Exception:
            if attempt == 2:
                page.screenshot(path=str(Path(os.environ.get("TMPDIR", "/tmp")) / f"{notebook}-failure.png"))
                raise
