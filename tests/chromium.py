"""Debian's headless Chromium driven by selenium, for the tests that look at pages as a person
would (the HTML report, the live dashboard).

The browser is the system one (/usr/bin/chromium with /usr/bin/chromedriver; nothing is
downloaded). Without it the browser tests FAIL and say so — .ci/run installs both — unless
STABLEARENA_SKIP_BROWSER=1 asks to skip them on a machine that cannot have them.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WIDTH, HEIGHT = 1280, 900


def require_browser() -> None:
    if CHROMIUM.exists() and CHROMEDRIVER.exists():
        return
    why = (
        "headless browser tests need Debian's chromium and chromium-driver (/usr/bin/chromium, "
        "/usr/bin/chromedriver); .ci/run installs them"
    )
    if os.environ.get("STABLEARENA_SKIP_BROWSER") == "1":
        pytest.skip(why)
    pytest.fail(why + " (set STABLEARENA_SKIP_BROWSER=1 to skip these tests instead)")


def start_browser(profile: Path, width: int = WIDTH, height: int = HEIGHT):
    """A headless Chromium that logs the console and every network request."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    require_browser()
    options = Options()
    options.binary_location = str(CHROMIUM)
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
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
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


def requested(driver) -> list[str]:
    """Every URL the browser requested since the last call."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
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
