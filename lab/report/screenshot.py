"""A page → a PNG, through headless Chromium (Debian package `chromium`), with the console errors it logged:
how the lab checks that its report renders, offline, without a script error or a failed load.

    screenshot(html, png) -> Screenshot
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Screenshot:
    png: Path
    console_errors: list[str]           # JavaScript errors, failed loads… (empty for a sound page)
    log: str                            # Chromium's stderr
    returncode: int
    truncated: bool = False             # the page is taller than the window: its bottom is cut


CONSOLE_ERROR = re.compile(r"Uncaught|ERROR:CONSOLE|:CONSOLE\(\d+\)\].*(?:Error|error)|Failed to load resource|"
                           r"net::ERR_|Refused to load|Not allowed to load")


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def screenshot(html: Path, png: Path, width: int = 1400, height: int = 16000, timeout: float = 120.0) -> Screenshot:
    """Opens html in headless Chromium (Debian package `chromium`), writes png (the page, its blank bottom
    trimmed) and returns the console errors Chromium logged. Raises RuntimeError without Chromium."""
    browser = chromium()
    if not browser:
        raise RuntimeError("Chromium not found (Debian: apt-get install chromium)")
    html, png = Path(html).resolve(), Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="report-chromium-") as profile:
        command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                   "--disable-background-networking", "--disable-component-update", "--disable-sync",
                   "--disable-dev-shm-usage", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
                   f"--user-data-dir={profile}", f"--screenshot={png}", f"--window-size={width},{height}",
                   html.as_uri()]
        png.unlink(missing_ok=True)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as error:
            raise RuntimeError(f"Chromium took over {timeout:.0f} s on {html}") from error
    log = done.stderr
    if not png.is_file():
        raise RuntimeError(f"Chromium wrote no screenshot (exit {done.returncode}): {log.strip()[-800:]}")
    errors = [line.strip() for line in log.splitlines() if CONSOLE_ERROR.search(line)]
    truncated = _trim(png)
    return Screenshot(png, errors, log, done.returncode, truncated)


def _trim(png: Path, margin: int = 24) -> bool:
    """Cuts the blank bottom of a tall screenshot; True when the page filled the whole window."""
    try:
        from PIL import Image, ImageChops
    except ImportError:
        return False
    with Image.open(png) as image:
        rgb = image.convert("RGB")
        background = Image.new("RGB", rgb.size, rgb.getpixel((rgb.width - 1, rgb.height - 1)))
        box = ImageChops.difference(rgb, background).getbbox()
        if not box:
            return False
        bottom = min(rgb.height, box[3] + margin)
        if bottom < rgb.height:
            rgb.crop((0, 0, rgb.width, bottom)).save(png)
            return False
        return True
