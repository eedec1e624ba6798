"""The TypeScript client in headless Chromium: a page served on another origin than the gateway
follows one turn through CORS and SSE. A cut and retried turn shows the discarded text vanish and
the final answer; a failed turn shows its typed error (issue "Adopted in an afternoon (2/2)").

Needs Debian's chromium and chromium-driver (bash .ci/setup installs them) and the built client
(the gate builds it before pytest: cd clients/typescript && npm test); skipped without them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Final, NamedTuple, cast
from urllib.parse import urlencode

import pytest
from chromium import chromium, needs_chromium
from redis.asyncio import Redis
from selenium import webdriver
from serving import running_worker, serving
from starlette.applications import Starlette
from starlette.responses import FileResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

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
from terminus.service.sdk.producer import Producer, TurnPublisher
from terminus.service.settings import Settings

ROOT: Final = Path(__file__).resolve().parents[2]
CLIENT: Final = ROOT / "clients" / "typescript" / "build" / "src"
PAGE: Final = Path(__file__).parent / "client_page" / "index.html"
PARTITIONS: Final = 4
SECRET: Final = b"client-browser-secret-0123456789"
DEADLINE_S: Final = 20.0

pytestmark = [
    needs_chromium,
    pytest.mark.skipif(
        not (CLIENT / "index.js").exists(),
        reason="needs the built TypeScript client (cd clients/typescript && npm test)",
    ),
]


class Served(NamedTuple):
    page: str  # the page's origin
    gateway: str  # the gateway's, another one
    producer: Producer


def page_app() -> Starlette:
    async def index(_: object) -> FileResponse:
        return FileResponse(PAGE)

    return Starlette(routes=[Route("/", index), Mount("/client", StaticFiles(directory=CLIENT))])


@pytest.fixture
async def served(redis: Redis, prefix: str) -> AsyncIterator[Served]:
    async with serving(page_app()) as page:
        settings = Settings(prefix=prefix, partitions=PARTITIONS, block_ms=100, cors_origins=[page])
        producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
        app = create_gateway(redis, settings, SECRET)
        async with running_worker(redis, settings), serving(app) as gateway:
            yield Served(page, gateway, producer)


@pytest.fixture
async def browser() -> AsyncIterator[webdriver.Chrome]:
    async with chromium() as driver:
        yield driver


async def open_page(driver: webdriver.Chrome, served: Served, session: str, turn: str) -> None:
    token = mint(SECRET, session, int(time.time()) + 600)
    query = urlencode({"gateway": served.gateway, "token": token, "session": session, "turn": turn})
    await asyncio.to_thread(driver.get, f"{served.page}/?{query}")


def read(driver: webdriver.Chrome) -> dict[str, object]:
    script = """return {
        text: document.getElementById("text").textContent,
        status: document.getElementById("status").textContent,
        done: document.getElementById("status").dataset.done === "true",
        error: document.getElementById("error").textContent,
        seen: Array.from(document.querySelectorAll("#seen li"), li => li.textContent),
    };"""
    return cast("dict[str, object]", driver.execute_script(script))


async def until(
    driver: webdriver.Chrome, check: Callable[[dict[str, object]], bool]
) -> dict[str, object]:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        shown = await asyncio.to_thread(read, driver)
        if check(shown):
            return shown
        if time.monotonic() > deadline:
            raise AssertionError(f"the page shows {shown}")
        await asyncio.sleep(0.1)


async def words(turn: TurnPublisher, attempt: int, text: list[str]) -> None:
    await turn.start_attempt(attempt=attempt, provider="p", model="m", contract="ai-sdk")
    await turn.emit(TextStart, part_id=f"t{attempt}")
    for word in text:
        await turn.emit(TextDelta, part_id=f"t{attempt}", delta=word)


async def test_a_cut_turn_shows_the_draft_vanish_and_the_final_answer(
    served: Served, browser: webdriver.Chrome
) -> None:
    await open_page(browser, served, "s-web", "t-web")
    turn = served.producer.turn("s-web", "t-web")
    await turn.start()
    await words(turn, 1, ["a draft ", "that will be cut"])
    await until(browser, lambda shown: "that will be cut" in str(shown["text"]))
    await turn.emit(StreamClosed)  # cut: the workers retry, and discard the draft
    await until(browser, lambda shown: shown["text"] == "")
    await words(turn, 2, ["the final ", "answer"])
    usage = Usage(output_tokens=2)
    await turn.emit(FinishStep, finish_reason="stop", raw_finish_reason="end_turn", usage=usage)
    shown = await until(browser, lambda shown: bool(shown["done"]))
    assert shown["text"] == "the final answer"
    assert shown["status"] == "finished"
    seen = cast("list[str]", shown["seen"])
    assert "a draft that will be cut" in seen, "the draft was shown while it streamed"
    assert seen.index("a draft that will be cut") < seen.index("") < seen.index("the final answer")


async def test_a_failed_turn_shows_its_typed_error(
    served: Served, browser: webdriver.Chrome
) -> None:
    await open_page(browser, served, "s-fail", "t-fail")
    turn = served.producer.turn("s-fail", "t-fail")
    await turn.start()
    await words(turn, 1, ["never "])
    await turn.emit(StreamError, status=401, message="invalid x-api-key")
    shown = await until(browser, lambda shown: bool(shown["done"]))
    assert shown["status"] == "failed"
    assert shown["error"] == "auth: invalid x-api-key"
