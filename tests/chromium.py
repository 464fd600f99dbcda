"""Debian's headless Chromium driven by selenium, for the tests that look at pages as a person
would (the HTML report, the live dashboard).

The browser is the system one — ``chromium`` and ``chromedriver`` found on PATH (Debian installs
them as /usr/bin/chromium and /usr/bin/chromedriver); nothing is downloaded. When they are
missing:

* on a developer's machine the browser tests are SKIPPED, and the run ends with one line saying
  what to install (``apt-get install chromium chromium-driver``);
* in CI (``CI=true``, as GitHub Actions and most CI services set it) they FAIL with that line:
  .ci/run installs both, so a missing browser there is a broken set-up, not a reason to skip;
* ``STABLEARENA_SKIP_BROWSER=1`` skips them anywhere, CI included.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

WIDTH, HEIGHT = 1280, 900
INSTALL = "apt-get install chromium chromium-driver"
#: The words every skip and failure for a missing browser starts with (the summary counts them).
MISSING = "headless browser tests need Chromium"


def find_browser() -> tuple[Path, Path] | None:
    """(chromium, chromedriver) found on PATH, or None when either is missing."""
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    return (Path(chromium), Path(driver)) if chromium and driver else None


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def missing_message() -> str:
    """One line: what is missing and the command that installs it."""
    absent = [name for name in ("chromium", "chromedriver") if shutil.which(name) is None]
    return f"{MISSING}: {' and '.join(absent)} not on PATH; install them with: {INSTALL}"


def require_browser() -> tuple[Path, Path]:
    """The browser and its driver; skip (fail with ``CI=true``) when they are missing."""
    found = find_browser()
    if found is not None:
        return found
    why = missing_message()
    if in_ci() and os.environ.get("STABLEARENA_SKIP_BROWSER") != "1":
        pytest.fail(f"{why} (CI=true: the browser tests must run there)", pytrace=False)
    pytest.skip(why)


def pytest_terminal_summary(terminalreporter) -> None:
    """After a run that skipped browser tests, say once why and what to install."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if MISSING in str(r.longrepr)]
    if skipped:
        terminalreporter.write_line(
            f"{len(skipped)} browser test(s) skipped: Chromium is missing; install it with: "
            f"{INSTALL} (with CI=true they fail instead)",
            yellow=True,
        )


def start_browser(profile: Path, width: int = WIDTH, height: int = HEIGHT):
    """A headless Chromium that logs the console and every network request."""
    chromium, chromedriver = require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(chromium)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-quic",
        "--hide-scrollbars",
        f"--window-size={width},{height}",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(chromedriver)), options=options)
    driver.set_page_load_timeout(60)
    return driver


def wait_loaded(driver) -> None:
    for _ in range(100):
        if driver.execute_script("return document.readyState") == "complete":
            return
        time.sleep(0.05)


def errors(driver) -> list[str]:
    """The console's errors since the last call."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


#: the browser's own pages (its first new-tab page asks chrome-untrusted://new-tab-page/… in
#: Chromium 14x): requests that never leave it and are not the page's
BROWSER_SCHEMES = ("chrome://", "chrome-untrusted://", "devtools://")


def requested(driver) -> list[str]:
    """Every URL the page requested since the last call (the browser's own pages left out)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            url = message["params"]["request"]["url"]
            if not url.startswith(BROWSER_SCHEMES):
                urls.append(url)
    return urls


def screenshot(driver, path: Path, *, full: bool = False, width: int = WIDTH) -> np.ndarray:
    """Save a screenshot (``full``: the whole page) and check it is not blank."""
    from PIL import Image

    if full:
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(width, min(int(height), 12000))
    driver.save_screenshot(str(path))
    img = np.asarray(Image.open(path).convert("RGB"))
    assert img.shape[1] == width
    assert np.any(img < 235, axis=2).mean() > 0.05  # not a blank page
    return img
