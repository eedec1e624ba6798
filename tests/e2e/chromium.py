"""Headless Chromium for the browser tests: Debian's `chromium`, driven by Debian's
`chromedriver`, named explicitly so Selenium Manager never looks for (or downloads) a driver or a
browser. WebDriver calls block: the tests run them in a thread, so the worker and the servers
sharing their event loop keep running."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service

CHROMIUM: Final = Path("/usr/bin/chromium")
CHROMEDRIVER: Final = Path("/usr/bin/chromedriver")
FLAGS: Final = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage")

needs_chromium = pytest.mark.skipif(
    not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
    reason="needs Debian's chromium and chromium-driver packages (bash .ci/setup installs them)",
)


@contextlib.asynccontextmanager
async def chromium(
    flags: Iterable[str] = (), capabilities: Mapping[str, Any] | None = None
) -> AsyncIterator[webdriver.Chrome]:
    """A browser with `FLAGS` and `flags`, quit when the block ends; the test is skipped if
    Chromium does not start."""
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, *flags):
        options.add_argument(flag)
    for name, value in (capabilities or {}).items():
        options.set_capability(name, value)
    service = Service(executable_path=str(CHROMEDRIVER))
    try:
        driver = await asyncio.to_thread(webdriver.Chrome, options=options, service=service)
    except WebDriverException as exc:
        pytest.skip(f"chromium did not start: {exc.msg}")
    try:
        yield driver
    finally:
        await asyncio.to_thread(driver.quit)
