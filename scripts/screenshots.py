#!/usr/bin/env python3
"""Screenshots of the demo's report.html for the docs.

    python scripts/screenshots.py [OUT_DIR]

Runs the built-in demo into a temporary directory (fixed run id and time, so only the page's
own changes change the pictures), opens its report.html from ``file://`` in headless
Chromium at 1300×900 and saves ``report-headline.png``, ``report-geometry.png``,
``report-cases.png`` (sorted by risk) and ``report-case-view.png`` (the worst case) into
OUT_DIR (default ``docs/images``).

Needs Playwright for Python (``pip install -e '.[dev]'``) and a Chromium: ``$CHROMIUM``, or
``chromium`` on the PATH (Debian's ``chromium`` package). The tests call
:func:`take_screenshots` too, when ``FAULTLINE_SCREENSHOTS=1``.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Browser

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "images"
VIEWPORT = {"width": 1300, "height": 900}
FIXED = {"run_id": "20261121T000000Z-000000", "created_at": "2026-11-21T00:00:00Z"}
NAMES = ("headline", "geometry", "cases", "case-view")


def take_screenshots(browser: Browser, report_html: Path, out: Path) -> list[Path]:
    """Save the report's main views as PNGs in ``out``.

    Returns:
        The files written, in the order of :data:`NAMES`.
    """
    out.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
    try:
        page = context.new_page()
        page.goto(report_html.resolve().as_uri())
        page.wait_for_selector("#case-table tbody tr")
        page.wait_for_selector("#scatter .point")
        paths = [out / f"report-{name}.png" for name in NAMES]
        page.screenshot(path=paths[0])
        page.locator("#case-table th[data-key=r]").click()  # the riskiest cases first
        for section, path in zip(("geometry", "cases"), paths[1:3], strict=True):
            page.evaluate("id => document.getElementById(id).scrollIntoView()", section)
            page.mouse.move(0, 0)  # no hover label or mode bar in the picture
            page.wait_for_timeout(200)
            page.screenshot(path=path)
        page.locator("a.open-case").first.click()  # the worst case
        page.wait_for_selector("#case-view[open]")
        page.screenshot(path=paths[3])
        return paths
    finally:
        context.close()


def main(argv: list[str]) -> int:
    from playwright.sync_api import sync_playwright

    from faultline.demo import run_demo

    out = Path(argv[1]) if len(argv) > 1 else OUT
    executable = os.environ.get("CHROMIUM") or shutil.which("chromium")
    if executable is None:
        print("no chromium found: install it or set $CHROMIUM", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        run_demo(tmp, **FIXED)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
            try:
                paths = take_screenshots(browser, Path(tmp) / "report.html", out)
            finally:
                browser.close()
    for path in paths:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
