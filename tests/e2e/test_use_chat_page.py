"""A stock `useChat` page (@ai-sdk/react 4.0.177, on ai 7.0.173) in headless Chromium, against
the real gateway over a real worker and Redis (issue 33).

The page (tests/frontends/chat-page) has no chunk handling of its own: `DefaultChatTransport({
api: "/api/chat" })` talks to the app's own server (tests/frontends/serve-chat-page.mjs), which
serves it and answers useChat's POST and resume GET with the TypeScript package's `chatRoutes`,
the session tokens kept on that server. Both are bundled with esbuild at test time, offline.

When the page POSTs, the server says which turn it "started"; the test plays that turn with the
shared harness (tests/ui_turns.py) and recorded answers. The worker and the gateway share the
test's event loop, so every blocking WebDriver call runs in a thread.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Final, NamedTuple, cast

import pytest
from chromium import chromium, needs_chromium
from redis.asyncio import Redis
from selenium import webdriver
from selenium.webdriver.common.by import By
from ui_turns import (
    ANSWER,
    REFUSED,
    ROOT,
    Served,
    cut_answer,
    play,
    proven_text,
    token,
    ui_gateway,
    until_open,
)

NODE: Final = shutil.which("node")
FRONTENDS: Final = ROOT / "tests/frontends"
SESSIONS: Final = ("s-1", "s-2", "s-3")
START_S: Final = 90.0  # the server bundles the page and the route helper before it listens
DEADLINE_S: Final = 30.0
PACE_S: Final = 0.15
SLOW_S: Final = 1.5  # the retry streams for about 6 s once let go: time for a reload

pytestmark = [
    needs_chromium,
    pytest.mark.skipif(
        NODE is None or not (FRONTENDS / "node_modules/@ai-sdk/react").is_dir(),
        reason="needs node and tests/frontends' npm ci (.ci/setup)",
    ),
]

# Everything the page shows, read in one script.
READ: Final = """
const all = (css) => Array.from(document.querySelectorAll(css));
return {
  status: document.querySelector('#status')?.textContent ?? null,
  error: document.querySelector('#error')?.textContent ?? '',
  progress: (document.querySelector('#progress')?.textContent ?? '').split(' ').filter(Boolean),
  messages: all('#messages > li').map((li) => ({
    role: li.className,
    id: li.dataset.id,
    texts: Array.from(li.querySelectorAll('.text'), (span) => span.textContent),
    typedError: li.querySelector('.typed-error').textContent,
  })),
  shown: window.shown ?? [],
};
"""


class App(NamedTuple):
    """The app's own server: its base URL, and the turns it was asked to start, in order."""

    base: str
    started: asyncio.Queue[dict[str, str]]


class Page:
    """The Chromium tab with the chat page."""

    def __init__(self, driver: webdriver.Chrome) -> None:
        self.driver = driver

    async def open(self, url: str) -> None:
        await asyncio.to_thread(self.driver.get, url)

    async def reload(self) -> None:
        await asyncio.to_thread(self.driver.refresh)

    async def send(self) -> None:
        await asyncio.to_thread(lambda: self.driver.find_element(By.ID, "send").click())

    async def read(self) -> dict[str, Any]:
        return cast("dict[str, Any]", await asyncio.to_thread(self.driver.execute_script, READ))

    async def until(self, check: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        """What the page shows once `check` holds."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            shown = await self.read()
            if shown["status"] is not None and check(shown):
                return shown
            if time.monotonic() > deadline:
                raise AssertionError(f"the page never showed {what}; it shows {shown}")
            await asyncio.sleep(0.1)


@pytest.fixture
async def served(redis: Redis, prefix: str) -> AsyncIterator[Served]:
    async with ui_gateway(redis, prefix) as found:
        yield found


@pytest.fixture
async def app(served: Served, tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[App]:
    """The app's server, asking the gateway for `hold` (or the mode the test is run with)."""
    assert NODE is not None
    mode = getattr(request, "param", "hold")
    tokens = json.dumps({session: token(session) for session in SESSIONS})
    with (tmp_path / "server.log").open("wb") as log:
        server = await asyncio.create_subprocess_exec(
            NODE,
            "serve-chat-page.mjs",
            str(tmp_path / "build"),
            served.base,
            mode,
            cwd=FRONTENDS,
            env={**os.environ, "TERMINUS_TOKENS": tokens},
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
        )
    assert server.stdout is not None
    try:
        line = await asyncio.wait_for(server.stdout.readline(), START_S)
        assert line, (tmp_path / "server.log").read_text()  # it ended before listening
        started: asyncio.Queue[dict[str, str]] = asyncio.Queue()
        reading = asyncio.create_task(_announced(server.stdout, started))
        try:
            yield App(f"http://127.0.0.1:{json.loads(line)['port']}", started)
        finally:
            reading.cancel()
    finally:
        server.terminate()
        await server.wait()


async def _announced(lines: asyncio.StreamReader, started: asyncio.Queue[dict[str, str]]) -> None:
    """Each turn the server started, as it says so."""
    while line := await lines.readline():
        await started.put(json.loads(line)["started"])


@pytest.fixture
async def page() -> AsyncIterator[Page]:
    async with chromium() as driver:
        yield Page(driver)


async def sent(page: Page, app: App, session: str) -> str:
    """The turn the app's server started when the page's question was sent."""
    await page.open(f"{app.base}/?session={session}")
    await page.until(lambda shown: shown["status"] == "ready", "a ready chat")
    await page.send()
    started = await asyncio.wait_for(app.started.get(), DEADLINE_S)
    assert started["session"] == session
    return started["turn"]


def answers(shown: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in shown["messages"] if m["role"] == "assistant"]


def finished(shown: dict[str, Any]) -> bool:
    return shown["status"] == "ready" and any(m["texts"] for m in answers(shown))


@pytest.mark.parametrize("app", ["hold", "reset"], indirect=True)
async def test_the_retried_turn_shows_only_the_final_text(
    served: Served, app: App, page: Page, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """In `hold` the cut attempt's text is never on screen; in `reset` (ai 7.0.173 reads
    `reset-step`) it streams live and is withdrawn, so the message ends with the final text."""
    turn = await sent(page, app, "s-1")
    await play(served, "s-1", turn, [cut_answer(tmp_path), ANSWER], pace_s=PACE_S)
    shown = await page.until(finished, "the answer")
    final = await proven_text(served, "s-1")
    assert [m["role"] for m in shown["messages"]] == ["user", "assistant"]
    (answer,) = answers(shown)
    assert answer["id"] == f"msg-{turn}"
    assert answer["texts"] == [final]
    if request.node.callspec.params["app"] == "hold":
        assert set(shown["shown"]) <= {"", final}, "the cut attempt's text was never on screen"
    else:
        assert set(shown["shown"]) - {"", final}, "text was shown live, before its proof"
    assert "retrying" in shown["progress"], "the transient status reached the page"
    assert shown["error"] == ""


async def test_the_failed_turn_shows_the_error(
    served: Served, app: App, page: Page, tmp_path: Path
) -> None:
    turn = await sent(page, app, "s-2")
    await play(served, "s-2", turn, [cut_answer(tmp_path), REFUSED], pace_s=PACE_S)
    shown = await page.until(lambda shown: shown["status"] == "error", "the error")
    (answer,) = answers(shown)
    provider = json.loads(REFUSED.read_text("utf-8"))["body"]["error"]["message"]
    assert provider in answer["typedError"], "the typed error is in the message's metadata"
    assert shown["error"] == answer["typedError"]
    assert answer["texts"] == []
    assert set(shown["shown"]) == {""}


async def test_a_page_reloaded_mid_turn_resumes_and_shows_the_final_text_once(
    served: Served, app: App, page: Page, tmp_path: Path
) -> None:
    """The page resumes the open turn while its retry waits, and is reloaded once the retry
    streams; the reloaded page resumes again, from `start`, to the end."""
    gate = asyncio.Event()
    files = [cut_answer(tmp_path), ANSWER]
    turn = asyncio.create_task(play(served, "s-3", "t-3", files, pace_s=SLOW_S, gate=gate))
    await until_open(served, "s-3")
    await page.open(f"{app.base}/?session=s-3&resume=1")
    await page.until(lambda shown: "retrying" in shown["progress"], "the resumed turn")
    gate.set()
    retry = ["retrying", "streaming"]
    await page.until(lambda shown: shown["progress"][-2:] == retry, "the retry streaming")
    await page.reload()
    shown = await page.until(finished, "the answer after the reload")
    await turn
    final = await proven_text(served, "s-3")
    assert [(m["role"], m["id"], m["texts"]) for m in shown["messages"]] == [
        ("assistant", "msg-t-3", [final])
    ]
    assert set(shown["shown"]) <= {"", final}
    assert shown["progress"][:2] == ["streaming", "retrying"], "replayed from start"
