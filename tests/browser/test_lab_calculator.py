"""The memory calculator in a real JupyterLab: run it, change inputs, read the new verdict, type a typo."""

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from .conftest import free_port

pytestmark = pytest.mark.browser
TOKEN = "course-test-token"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a free loopback port, serving a folder with one calculator notebook."""
    root = tmp_path_factory.mktemp("lab")
    home = tmp_path_factory.mktemp("lab-home")
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                'from course_lib.widgets import memory_calculator\nmemory_calculator(params="7B", precision="bf16-mixed")'
            )
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    nbformat.write(nb, root / "calculator.ipynb")
    port = free_port()
    settings = home / "settings"
    # Answer JupyterLab's "receive news?" question in advance, so no dialog covers the notebook.
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(settings), JUPYTER_CONFIG_DIR=str(home / "config"))
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ServerApp.port_retries=0",
            "--ServerApp.ip=127.0.0.1", "--allow-root", f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={root}",
        ],
        stdout=subprocess.DEVNULL, stderr=open(home / "lab.log", "w"), env=env,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=1)
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail("JupyterLab exited:\n" + (home / "lab.log").read_text()[-3000:])
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("JupyterLab did not start within 60 s:\n" + (home / "lab.log").read_text()[-3000:])
    # Start the notebook's kernel through the REST API, so JupyterLab opens it with no kernel dialog.
    request = urllib.request.Request(
        f"{url}/api/sessions",
        data=json.dumps({"path": "calculator.ipynb", "type": "notebook", "kernel": {"name": "python3"}}).encode(),
        headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"},
        method="POST",
    )
    urllib.request.urlopen(request, timeout=60)
    yield url
    proc.terminate()
    proc.wait(timeout=20)


def _set(page, css_class: str, value: str) -> None:
    box = page.locator(f".{css_class} input")
    box.fill(value)
    box.press("Enter")


def test_calculator_updates_in_jupyterlab(offline_page, lab):
    page = offline_page
    page.goto(f"{lab}/lab/tree/calculator.ipynb?token={TOKEN}")
    cell = page.locator(".jp-Cell .jp-InputArea-editor").first
    cell.wait_for(timeout=60_000)
    # Wait until the status bar shows the kernel connected and idle, then run the cell (again if the
    # first key press came before the kernel was ready).
    page.get_by_text("| Idle").first.wait_for(timeout=60_000)
    result = page.locator(".course-memory-result")
    for attempt in range(3):
        cell.click()
        page.keyboard.press("Control+Enter")
        try:
            result.wait_for(timeout=20_000)
            break
        except Exception:
            if attempt == 2:
                page.screenshot(path=str(Path(os.environ.get("TMPDIR", "/tmp")) / "lab-calculator-failure.png"))
                raise
    assert "1 GPU(s), ZeRO stage 0" in result.inner_text()
    assert "does not fit on 80 GiB" in result.inner_text()

    _set(page, "course-gpus", "8")
    _set(page, "course-zero", "3")
    page.wait_for_function(
        "() => document.querySelector('.course-memory-result').innerText.includes('8 GPU(s), ZeRO stage 3')",
        timeout=30_000,
    )
    text = result.inner_text()
    assert "fits on 80 GiB" in text and "does not fit on 80 GiB" not in text

    # A typo shows a message inside the widget, not a traceback.
    _set(page, "course-params", "7 billion")
    page.wait_for_function(
        "() => document.querySelector('.course-memory-result').innerText.includes('Cannot compute')", timeout=30_000
    )
    assert "write a positive number such as 7e9" in result.inner_text()
    assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
    assert "Traceback" not in page.locator(".jp-OutputArea").first.inner_text()
