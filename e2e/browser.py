"""A real headless Chromium for the dashboard's browser tests: Debian's `chromium` driven through its own
`chromium-driver` by Selenium.

Why Selenium: Debian ships chromium and chromedriver from one source package, so the WebDriver speaks
exactly the browser's version and nothing is downloaded; Selenium is the W3C WebDriver reference client,
pure Python from PyPI. (Playwright pins its own Chromium build and is only loosely tied to others; a
hand-written DevTools client would be code of our own to keep.)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("STATICFLEET_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("STATICFLEET_CHROMEDRIVER", "/usr/bin/chromedriver")
WIDE = (1280, 800)
NARROW = (400, 800)

# As root, without a GPU, a display or the network beyond 127.0.0.1.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


class BrowserMissing(RuntimeError):
    pass


def check_installed() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists() and not shutil.which(p)]
    if missing:
        raise BrowserMissing(
            f"{', '.join(missing)} not found: the browser tests need Debian's chromium and chromium-driver "
            "(apt-get install -y chromium chromium-driver; .ci/run installs them)"
        )


@contextmanager
def chromium(size: tuple[int, int] = WIDE) -> Iterator[Any]:
    """A fresh headless Chromium (its own profile directory), closed afterwards."""
    check_installed()
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must never look for downloads
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="staticfleet-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={size[0]},{size[1]}")
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_in_page(driver: Any, probe: Callable[[Any], Any], *, timeout: float, what: str) -> Any:
    """Polls probe(driver) every 50 ms until it returns something truthy, without reloading the page."""
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    def safe(d: Any) -> Any:
        try:
            return probe(d)
        except StaleElementReferenceException:  # the page re-rendered between find and read
            return False

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.05).until(safe)
    except TimeoutException as exc:
        raise TimeoutError(f"timed out after {timeout:g}s waiting in the page for {what}") from exc


def texts(driver: Any, css: str) -> list[str]:
    """The visible text of every element matching css, read in one go inside the page (the page
    re-renders as snapshots arrive, so elements found first and read later may be gone)."""
    found = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map((e) => e.innerText.trim())", css
    )
    return [str(t) for t in found]


def rows(driver: Any, css: str, cells: dict[str, str]) -> list[dict[str, str | None]]:
    """For each element matching css (a table row), the text of each named cell selector, in one go."""
    found = driver.execute_script(
        """
        const [css, cells] = arguments;
        return Array.from(document.querySelectorAll(css)).map((row) => Object.fromEntries(
          Object.entries(cells).map(([key, sel]) => {
            const cell = row.querySelector(sel);
            return [key, cell ? cell.innerText.trim() : null];
          })));
        """,
        css,
        cells,
    )
    return [dict(r) for r in found]


def page_overflows(driver: Any) -> bool:
    """True when the document itself scrolls sideways (wide tables scroll inside their own region)."""
    return bool(driver.execute_script("return document.documentElement.scrollWidth > window.innerWidth + 1"))
