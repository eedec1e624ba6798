"""The AI SDK UI message stream routes on a real worker and gateway (DESIGN section 7): a cut
and retried turn shows only its proven text in both modes, live or replayed, and a resume from
`start` mid-turn duplicates nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Final

import httpx
import msgspec
import pytest
from redis.asyncio import Redis
from ui_reader import UiMessage, read
from ui_turns import (
    ANSWER,
    REFUSED,
    Served,
    auth,
    cut_answer,
    play,
    proven_text,
    read_ui,
    ui_gateway,
)

from terminus.service.frontends.chunks import UiChunk
from terminus.service.frontends.ui_stream import MODES, Mode

TIMEOUT: Final = httpx.Timeout(30.0)


@pytest.fixture
async def served(redis: Redis, prefix: str) -> Any:
    async with ui_gateway(redis, prefix) as found:
        yield found


def turn_url(served: Served, session: str, turn: str, mode: Mode = "hold") -> str:
    return f"{served.base}/v1/sessions/{session}/turns/{turn}/ui-message-stream?mode={mode}"


def open_url(served: Served, session: str, mode: Mode = "hold") -> str:
    return f"{served.base}/v1/sessions/{session}/ui-message-stream?mode={mode}"


def rebuilt(chunks: list[dict[str, Any]]) -> UiMessage:
    return read([msgspec.convert(c, UiChunk) for c in chunks])


def types(chunks: list[dict[str, Any]]) -> list[str]:
    return [str(c["type"]) for c in chunks]


@pytest.mark.parametrize("mode", MODES)
async def test_a_retried_turn_read_live_shows_only_its_proven_text(
    served: Served, mode: Mode, tmp_path: Path
) -> None:
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        live = asyncio.create_task(read_ui(client, turn_url(served, "s-1", "t-1", mode), "s-1"))
        await asyncio.sleep(0.3)  # the client waits for the turn before it starts
        # Paced, so that the cut attempt's text is sent before the workers discard it.
        await play(served, "s-1", "t-1", [cut_answer(tmp_path), ANSWER], pace_s=0.15)
        answer = await live
        replayed = await read_ui(client, turn_url(served, "s-1", "t-1", mode), "s-1")
    assert answer.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert answer.done
    assert replayed.done
    proven = await proven_text(served, "s-1")
    assert proven.startswith("Olá!")
    assert rebuilt(answer.chunks).text() == rebuilt(replayed.chunks).text() == proven
    assert answer.chunks[0] == replayed.chunks[0]
    assert answer.chunks[0]["messageId"] == "msg-t-1"
    assert types(answer.chunks)[-1] == "finish"
    assert "reset-step" not in types(replayed.chunks), "a replay never shows a discarded attempt"
    if mode == "hold":
        assert "reset-step" not in types(answer.chunks)
        assert answer.chunks == replayed.chunks, "a held stream is the same live or replayed"
    else:
        assert "reset-step" in types(answer.chunks), "the cut attempt's text was shown live"


@pytest.mark.parametrize("mode", MODES)
async def test_a_resume_mid_turn_replays_from_start_and_duplicates_nothing(
    served: Served, mode: Mode, tmp_path: Path
) -> None:
    turn = asyncio.create_task(
        play(served, "s-2", "t-2", [cut_answer(tmp_path), ANSWER], pace_s=0.1)
    )
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        first = await _first_chunks(client, open_url(served, "s-2", mode), 3)
        resumed = await read_ui(client, open_url(served, "s-2", mode), "s-2")
        await turn
        after = await client.get(open_url(served, "s-2", mode), headers=auth("s-2"))
    assert first[0]["type"] == "start"
    assert resumed.done
    assert resumed.chunks[0] == first[0]
    message = rebuilt(resumed.chunks)
    assert message.text() == await proven_text(served, "s-2")
    texts = [p["id"] for p in message.parts if p["type"] == "text"]
    assert len(texts) == 1, "one proven text part, shown once"
    assert [p["type"] for p in message.parts].count("step-start") == 1
    assert after.status_code == 204, "no open turn: nothing to resume"


async def _first_chunks(client: httpx.AsyncClient, url: str, count: int) -> list[dict[str, Any]]:
    """The first chunks of the session's open turn, once it has one."""
    for _ in range(200):
        answer = await read_ui(client, url, "s-2", stop_after=count)
        if answer.status == 200:
            return answer.chunks
        assert answer.status == 204
        await asyncio.sleep(0.05)
    raise AssertionError("the turn never opened")


async def test_a_failed_turn_ends_with_its_typed_error(served: Served, tmp_path: Path) -> None:
    await play(served, "s-3", "t-3", [cut_answer(tmp_path), REFUSED])
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        answer = await read_ui(client, turn_url(served, "s-3", "t-3", "reset"), "s-3")
    assert answer.done
    metadata, error, finish = answer.chunks[-3:]
    typed = metadata["messageMetadata"]["terminus"]["error"]
    assert typed["status"] == 400
    assert typed["retryable"] is False
    assert error == {"type": "error", "errorText": typed["message"]}
    assert finish == {"type": "finish", "finishReason": "error"}
    assert rebuilt(answer.chunks).text() == ""


async def test_the_routes_refuse_what_they_cannot_serve(served: Served) -> None:
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        empty = await client.get(open_url(served, "s-4"), headers=auth("s-4"))
        bad = await client.get(
            f"{served.base}/v1/sessions/s-4/ui-message-stream?mode=live", headers=auth("s-4")
        )
        other = await client.get(open_url(served, "s-4"), headers=auth("s-5"))
        none = await client.get(open_url(served, "s-4"))
    assert empty.status_code == 204
    assert bad.status_code == 400
    assert "mode must be one of hold, reset" in bad.json()["error"]
    assert other.status_code == 403
    assert none.status_code == 401
