"""Sphinx extension of the course book: every inline script of a page written once.

Sphinx 7.4 writes twice each inline script that an extension adds with
``app.add_js_file(None, body=...)`` once the HTML builder has started: once as added
(its file name ``None``) and once more when the builder re-reads the registry before
writing (its file name ``''``), two entries that do not compare equal. sphinx-thebe's
script declares ``const THEBE_JS_URL``, so its copy is a SyntaxError in the console
of every page ("Identifier 'THEBE_JS_URL' has already been declared");
sphinx-togglebutton's ``var togglebuttonSelector`` is written twice as well. This keeps
the first of each script a page would load twice.
"""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx


def _key(script: Any) -> tuple:
    """What makes two scripts of a page the same: file, priority, attributes."""
    attributes = getattr(script, "attributes", {}) or {}
    return (getattr(script, "filename", script) or "", getattr(script, "priority", 500),
            tuple(sorted((str(k), str(v)) for k, v in attributes.items())))


def drop_repeated_scripts(app: Sphinx, pagename: str, templatename: str,
                          context: dict[str, Any], doctree: Any) -> None:
    """Remove from the page's scripts each one that is already in the list before it."""
    scripts = context.get("script_files")
    if not isinstance(scripts, list):
        return
    seen: set[tuple] = set()
    unique = []
    for script in scripts:
        if _key(script) not in seen:
            seen.add(_key(script))
            unique.append(script)
    scripts[:] = unique  # the builder's own list: it restores it after the page


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the handler; it runs after the other extensions have added scripts."""
    app.connect("html-page-context", drop_repeated_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
