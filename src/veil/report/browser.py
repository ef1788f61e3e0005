"""Open a rendered report in headless Chromium: fail on broken images or script errors; save a screenshot.

``python -m veil.report.browser REPORT.html [SCREENSHOT.png]`` (``make report-check``). The page sets
``data-check`` on its ``<body>`` once loaded (``ok``, ``broken-images:N`` or ``script-error``; see
:mod:`veil.report.bench`); this reads it from the DOM Chromium dumps after loading the page from disk, with the
network off.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from veil.errors import DataFormatError, ResourceMissingError

__all__ = ["check_in_browser"]

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--virtual-time-budget=5000"]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise ResourceMissingError("chromium", "apt-get install -y chromium",
                               message="headless Chromium is not installed; `make report-check` installs the Debian "
                                       "package `chromium` (or run: apt-get install -y chromium)")


def check_in_browser(page: str | Path, screenshot: str | Path | None = None, *, timeout: float = 120) -> str:
    """The page's ``data-check`` after Chromium loaded it; raises DataFormatError unless it is ``ok``."""
    page = Path(page).resolve()
    if not page.is_file():
        raise DataFormatError(f"{page} does not exist; render it first (`veil bench` or `veil report`)")
    exe = _chromium()
    with tempfile.TemporaryDirectory() as profile:
        base = [exe, *FLAGS, f"--user-data-dir={profile}"]
        dom = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                             timeout=timeout).stdout
        if screenshot is not None:
            shot = Path(screenshot).resolve()
            subprocess.run([*base, f"--screenshot={shot}", "--window-size=1100,1500", "--hide-scrollbars",
                            page.as_uri()], capture_output=True, text=True, timeout=timeout, check=True)
    found = re.search(r"<body[^>]*data-check=\"([^\"]*)\"", dom)
    state = found.group(1) if found else "no-body"
    if state != "ok":
        raise DataFormatError(f"{page}: the browser reports {state!r} (want 'ok': every image loaded, no script "
                              f"error)")
    return state


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not 1 <= len(args) <= 2:
        print("usage: python -m veil.report.browser REPORT.html [SCREENSHOT.png]", file=sys.stderr)
        return 2
    try:
        state = check_in_browser(args[0], args[1] if len(args) > 1 else None)
    except (DataFormatError, ResourceMissingError) as exc:
        print(f"veil: {exc}", file=sys.stderr)
        return 1
    print(f"{args[0]}: {state}" + (f"; screenshot {args[1]}" if len(args) > 1 else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
