"""The inspector page in headless Chromium (Debian's `chromium` and `chromium-driver`), over a real
Redis, a running worker and the gateway served by uvicorn on a loopback port.

The browser is tests/e2e/chromium.py's. The worker and the gateway share the test's event loop, so
every blocking WebDriver call runs in a thread.

`truncated` is never a resting state: the event that truncates an attempt also schedules the retry
(or fails the turn), so the page shows it on the turn's path of states, in its timeline and on the
diagram, while the current state goes streaming -> retrying -> finished.

With TERMINUS_UPDATE_DOCS=1 the final screenshot is written to docs/inspector.png.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Final, NamedTuple, TypeVar, cast

import pytest
from chromium import chromium, needs_chromium
from redis.asyncio import Redis
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from serving import serving

from terminus.events.inbound import (
    FinishStep,
    StreamClosed,
    StreamError,
    TextDelta,
    TextStart,
    Usage,
)
from terminus.service.gateway.routes import create_gateway
from terminus.service.gateway.tokens import mint
from terminus.service.runtime.worker import Worker
from terminus.service.sdk.producer import Producer, TurnPublisher
from terminus.service.settings import Settings

DOCS_SHOT: Final = Path(__file__).resolve().parents[2] / "docs" / "inspector.png"
PARTITIONS: Final = 4
SECRET: Final = b"inspector-browser-secret-0123456"
DEADLINE_S: Final = 20.0
WINDOW: Final = (1280, 960)
LIVE: Final = "t-live-7f3a"
ODD: Final = "t-odd-51e0"
ODD_RAW: Final = "insufficient_system_resource"
CHROMIUM_FLAGS: Final = (
    "--hide-scrollbars",
    f"--window-size={WINDOW[0]},{WINDOW[1]}",
)
T = TypeVar("T")

pytestmark = needs_chromium


class Served(NamedTuple):
    base: str
    producer: Producer


class Page:
    """A Chromium tab; each WebDriver call runs in a thread so the served app keeps running."""

    def __init__(self, driver: webdriver.Chrome) -> None:
        self.driver = driver

    async def call(self, fn: Callable[[], T]) -> T:
        return await asyncio.to_thread(fn)

    def console(self) -> list[dict[str, Any]]:
        """What the page logged to its console (Chromium's own `get_log` is untyped)."""
        get_log = cast("Callable[[str], list[dict[str, Any]]]", self.driver.get_log)
        return get_log("browser")

    def read(self, css: str) -> list[str]:
        """The rendered text of every element matching `css`, read in one script: the page
        redraws its tables as it polls, so an element found in one call may be gone in the next."""
        script = (
            "return Array.from(document.querySelectorAll(arguments[0]),"
            ' e => e.innerText ?? e.textContent ?? "");'  # SVG elements have no innerText
        )
        found = cast("list[str]", self.driver.execute_script(script, css))
        return [text.replace("\t", " ") for text in found]  # table cells, as WebDriver's .text

    async def click(self, css: str) -> None:
        """Click the element, retrying while a redraw replaces it between finding and clicking."""

        def attempt() -> bool:
            try:
                self.driver.find_element(By.CSS_SELECTOR, css).click()
            except StaleElementReferenceException:
                return False
            return True

        await self.until(attempt, f"a click on {css}")

    async def texts(self, css: str) -> list[str]:
        return await self.call(lambda: self.read(css))

    async def until(self, check: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not await self.call(check):
            if time.monotonic() > deadline:
                shown = await self.texts("#d-state, #d-path, #status")
                raise AssertionError(f"the page never showed {what}; it shows {shown}")
            await asyncio.sleep(0.1)

    async def shows(self, css: str, text: str) -> None:
        def check() -> bool:
            return any(text in shown for shown in self.read(css))

        await self.until(check, f"{text!r} in {css}")


@pytest.fixture
async def served(redis: Redis, prefix: str) -> AsyncIterator[Served]:
    settings = Settings(prefix=prefix, partitions=PARTITIONS, block_ms=100)
    worker = Worker(redis, settings)
    working = asyncio.create_task(worker.run())
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    try:
        async with serving(create_gateway(redis, settings, SECRET)) as base:
            yield Served(base, producer)
    finally:
        await worker.stop()
        await working


@pytest.fixture
async def page() -> AsyncIterator[Page]:
    logging = {"goog:loggingPrefs": {"browser": "ALL"}}
    async with chromium(CHROMIUM_FLAGS, logging) as driver:
        viewport = {
            "width": WINDOW[0],
            "height": WINDOW[1],
            "deviceScaleFactor": 1,
            "mobile": False,
        }
        # The window size includes the browser's frame; the screenshot is the viewport.
        await asyncio.to_thread(
            driver.execute_cdp_cmd, "Emulation.setDeviceMetricsOverride", viewport
        )
        yield Page(driver)


async def attempt(turn: TurnPublisher, n: int, words: list[str]) -> None:
    await turn.start_attempt(
        attempt=n, provider="anthropic", model="claude-sonnet-4-5", contract="ai-sdk"
    )
    await turn.emit(TextStart, part_id=f"text-{n}")
    for word in words:
        await turn.emit(TextDelta, part_id=f"text-{n}", delta=word)


async def earlier_turns(producer: Producer) -> None:
    """A finished and a failed turn, so the live one is not alone in the list."""
    done = producer.turn("s-web-1", "t-done-11c2")
    await done.start()
    await attempt(done, 1, ["all ", "fine"])
    usage = Usage(output_tokens=2)
    await done.emit(FinishStep, finish_reason="stop", raw_finish_reason="end_turn", usage=usage)
    await done.emit(StreamClosed)
    failed = producer.turn("s-web-2", "t-auth-90bd")
    await failed.start()
    await attempt(failed, 1, [])
    await failed.emit(StreamError, status=401, message="invalid x-api-key")
    # A finish reason no table knows proves nothing: the attempt is cut as `unknown_finish`
    # and, with no attempt left, the turn fails; the raw value is what the operator must see.
    odd = producer.turn("s-web-3", ODD)
    await odd.start(max_attempts=1)
    await attempt(odd, 1, ["half an ", "answer"])
    await odd.emit(FinishStep, finish_reason="unknown", raw_finish_reason=ODD_RAW)
    await odd.emit(StreamClosed)


def sign_in(page: Page, token: str) -> None:
    """Type the operator token into the page's form and submit it, as an operator does."""
    field = page.driver.find_element(By.ID, "token-input")
    field.send_keys(token)
    field.submit()


async def test_the_page_follows_a_turn_through_truncation_retry_and_finish(
    served: Served, page: Page, tmp_path: Path
) -> None:
    await earlier_turns(served.producer)
    await page.call(lambda: page.driver.get(f"{served.base}/inspect"))
    await page.shows("#login-reason", "needs an operator token")
    token = mint(SECRET, None, int(time.time()) + 600)
    await page.call(lambda: sign_in(page, token))  # the form: the token never enters a URL
    await page.shows("#turns tbody", "t-auth-90bd")
    await page.shows("#turns tbody", "t-done-11c2")
    assert "token" not in await page.call(lambda: page.driver.current_url)
    (cookie,) = await page.call(page.driver.get_cookies)
    assert (cookie["name"], cookie["httpOnly"], cookie["sameSite"]) == (
        "terminus_token",
        True,
        "Strict",
    )

    live = served.producer.turn("s-web-7", LIVE)
    await live.start(max_attempts=3)
    await attempt(live, 1, ["The ", "answer ", "starts "])
    await page.shows("#d-title", LIVE)  # nothing pinned: the page follows the newest turn
    await page.shows("#d-state", "streaming")
    await page.shows(f'#turns tr[data-turn="{LIVE}"] .st', "streaming")

    await live.emit(StreamClosed)  # the proxy hangs up: no terminal proof
    await page.shows("#d-state", "retrying")
    await page.shows(f'#turns tr[data-turn="{LIVE}"] .st', "retrying")
    await page.shows("#d-path", "streaming\n→\ntruncated\n→\nretrying")
    await page.shows("#d-timeline tr.kind-attempt_discarded", "dropped parts: text-1")
    await page.shows("#d-timeline tr.kind-retrying", "attempt 2 of 3 in")
    await page.shows("#d-timeline", "streaming → truncated (truncate)")
    await page.shows("#d-attempts", "missing_terminal")
    await asyncio.sleep(1.0)  # the retry's wait: the page holds at retrying

    await attempt(live, 2, ["The ", "answer ", "is ", "42."])
    usage = Usage(input_tokens=812, output_tokens=4)
    await live.emit(FinishStep, finish_reason="stop", raw_finish_reason="end_turn", usage=usage)
    await live.emit(StreamClosed)
    await page.shows("#d-state", "finished")
    await page.shows(f'#turns tr[data-turn="{LIVE}"] .st', "finished")
    await page.shows("#d-timeline tr.kind-turn_finished", "stopReason end_turn")
    await page.shows("#diagram .sd-state.current", "finished")
    path = "pending → streaming → truncated → retrying → streaming → awaiting_terminal → finished"
    assert (await page.texts("#d-path"))[0].replace("\n", " ") == path
    taken = {"truncate", "schedule_retry", "start_attempt", "finish_step", "prove"}
    assert set(await page.texts("#diagram .sd-edge.taken, #diagram .sd-label.taken")) >= taken
    outcomes = [row.split(" ")[2] for row in await page.texts("#d-attempts tbody tr")]
    await page.shows("#d-attempts", "stop · raw end_turn")
    assert outcomes == ["truncated", "finished"]
    assert await page.call(page.console) == []  # no script error, no CSP violation

    shot = DOCS_SHOT if os.environ.get("TERMINUS_UPDATE_DOCS") == "1" else tmp_path / "shot.png"
    assert await page.call(lambda: page.driver.save_screenshot(str(shot)))

    row = '#turns tr[data-turn="t-auth-90bd"]'
    await page.click(row)
    await page.shows("#d-title", "t-auth-90bd")  # pinned by `#turn=` in the URL
    await page.shows("#d-attempts", "invalid x-api-key")
    assert (await page.call(lambda: page.driver.current_url)).endswith("#turn=t-auth-90bd")

    await page.click(f'#turns tr[data-turn="{ODD}"]')
    await page.shows("#d-title", ODD)
    await page.shows("#d-attempts", f"raw {ODD_RAW}")
    await page.shows("#d-attempts", "unknown_finish")
