"""Fixtures for the browser tests: Debian's chromium through Playwright, loopback-only networking."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import socket
import threading
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("COURSE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
]
ROOT = Path(__file__).resolve().parents[2]
BOOK_HTML = ROOT / "book" / "_build" / "html"


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def is_loopback(url: str) -> bool:
    """Whether a request goes to this machine only (or is inline data)."""
    from urllib.parse import urlparse

    parsed = urlparse(url)
    if parsed.scheme in ("data", "blob", "about"):
        return True
    return parsed.hostname in ("127.0.0.1", "localhost", "::1")


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists() and not shutil.which(CHROMIUM):
        pytest.fail(f"{CHROMIUM} not found: install Debian's chromium (apt-get install chromium) or set COURSE_CHROMIUM")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
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


@pytest.fixture(scope="session")
def book_server():
    """The built book served over HTTP on a free loopback port."""
    if not (BOOK_HTML / "index.html").exists():
        pytest.fail("the book is not built: run `bash scripts/build.sh` first")
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", free_port()), functools.partial(_QuietHandler, directory=str(BOOK_HTML))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
