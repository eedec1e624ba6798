"""The AI SDK's own readers (ai 6.0.326 and 7.0.173, tests/frontends) on the gateway's UI message
stream, over a real worker and Redis: the message each one builds is the proven one, ai 6 never
meets a chunk it rejects in `hold`, a failed turn's typed error lands in `message.metadata`, and
useChat's resume after a reload mid-turn duplicates nothing (issue 33)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
from redis.asyncio import Redis
from ui_turns import (
    ANSWER,
    REFUSED,
    ROOT,
    Served,
    auth,
    cut_answer,
    play,
    proven_text,
    token,
    ui_gateway,
)

NODE: Final = shutil.which("node")
FRONTENDS: Final = ROOT / "tests/frontends"
READER_TIMEOUT_S: Final = 60.0
PACE_S: Final = 0.15
SLOW_S: Final = 0.4  # the retry streams for about 1.6 s once let go
CUT_MS: Final = 400  # then the first chat is stopped: the second resumes well before the end

pytestmark = pytest.mark.skipif(
    NODE is None or not (FRONTENDS / "node_modules").is_dir(),
    reason="needs node and tests/frontends' npm ci (.ci/setup)",
)


@pytest.fixture
async def served(redis: Redis, prefix: str) -> Any:
    async with ui_gateway(redis, prefix) as found:
        yield found


async def sdk(version: str, command: str, url: str, session: str, *args: str) -> Any:
    """What tests/frontends/read-ui-stream.mjs printed last, run with the `ai` of `version`."""
    reader = await start_sdk(version, command, url, session, *args)
    return await ended(reader)


async def start_sdk(
    version: str, command: str, url: str, session: str, *args: str
) -> asyncio.subprocess.Process:
    assert NODE is not None
    return await asyncio.create_subprocess_exec(
        NODE,
        "read-ui-stream.mjs",
        version,
        command,
        url,
        token(session),
        *args,
        cwd=FRONTENDS,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def connected(reader: asyncio.subprocess.Process) -> None:
    """Once the reader has its stream open (its first line says so)."""
    assert reader.stdout is not None
    line = await asyncio.wait_for(reader.stdout.readline(), READER_TIMEOUT_S)
    assert json.loads(line) == {"connected": True}, line


async def ended(reader: asyncio.subprocess.Process) -> Any:
    out, err = await asyncio.wait_for(reader.communicate(), READER_TIMEOUT_S)
    assert reader.returncode == 0, err.decode()
    return json.loads(out.splitlines()[-1])


def turn_url(served: Served, session: str, turn: str, mode: str) -> str:
    return f"{served.base}/v1/sessions/{session}/turns/{turn}/ui-message-stream?mode={mode}"


def text_of(message: dict[str, Any]) -> str:
    return "".join(p["text"] for p in message["parts"] if p["type"] == "text")


@pytest.mark.parametrize(("version", "mode"), [("ai6", "hold"), ("ai7", "hold"), ("ai7", "reset")])
async def test_a_cut_and_retried_turn_read_live_is_its_proven_text(
    served: Served, version: str, mode: str, tmp_path: Path
) -> None:
    url = turn_url(served, "s-1", "t-1", mode)
    reader = await start_sdk(version, "read", url, "s-1")
    await connected(reader)  # it waits on the turn before the turn streams
    # Paced, so that the cut attempt's text reaches the reader before the workers discard it.
    await play(served, "s-1", "t-1", [cut_answer(tmp_path), ANSWER], pace_s=PACE_S)
    found = await ended(reader)
    assert found["errors"] == []
    assert text_of(found["message"]) == await proven_text(served, "s-1")
    assert found["message"]["id"] == "msg-t-1"
    assert found["message"]["metadata"]["terminus"]["discarded"] == 1
    assert ("reset-step" in found["types"]) == (mode == "reset")


async def test_ai_6_rejects_reset_step_which_is_why_reset_is_asked_for(
    served: Served, tmp_path: Path
) -> None:
    url = turn_url(served, "s-2", "t-2", "reset")
    reader = await start_sdk("ai6", "read", url, "s-2")
    await connected(reader)
    await play(served, "s-2", "t-2", [cut_answer(tmp_path), ANSWER], pace_s=PACE_S)
    found = await ended(reader)
    assert found["errors"], "ai 6 validates every chunk and stops on reset-step"
    assert "reset-step" not in found["types"]


@pytest.mark.parametrize("version", ["ai6", "ai7"])
async def test_a_failed_turn_gives_the_typed_error_in_metadata_and_the_error_chunk(
    served: Served, version: str, tmp_path: Path
) -> None:
    await play(served, "s-3", "t-3", [cut_answer(tmp_path), REFUSED])
    found = await sdk(version, "read", turn_url(served, "s-3", "t-3", "hold"), "s-3")
    error = found["message"]["metadata"]["terminus"]["error"]
    assert (error["status"], error["retryable"]) == (400, False)
    assert found["errors"] == [error["message"]]
    assert found["types"][-3:] == ["message-metadata", "error", "finish"]
    assert text_of(found["message"]) == ""


@pytest.mark.parametrize(("version", "mode"), [("ai6", "hold"), ("ai7", "hold"), ("ai7", "reset")])
async def test_use_chat_resumed_after_a_reload_mid_turn_duplicates_nothing(
    served: Served, version: str, mode: str, tmp_path: Path
) -> None:
    """The first chat resumes while the retry waits, and is stopped while the retry streams
    (a reload); a new chat, given what the first one held, resumes to the end."""
    gate = asyncio.Event()
    files = [cut_answer(tmp_path), ANSWER]
    turn = asyncio.create_task(play(served, "s-4", "t-4", files, pace_s=SLOW_S, gate=gate))
    url = f"{served.base}/v1/sessions/s-4/ui-message-stream?mode={mode}"
    await _until_open(url, "s-4")
    reader = await start_sdk(version, "chat", url, "s-4", str(CUT_MS))
    await connected(reader)
    gate.set()
    found = await ended(reader)
    await turn
    assert found["errors"] == []
    assert [m["id"] for m in found["held"]] == ["q", "msg-t-4"], "cut with the answer under way"
    question, answer = found["messages"]
    assert question["id"] == "q"
    assert answer["id"] == "msg-t-4"
    assert text_of(answer) == await proven_text(served, "s-4")
    kinds = [p["type"] for p in answer["parts"]]
    assert kinds.count("step-start") == 1
    assert kinds.count("text") == 1
    assert "retrying" in found["data"], "the transient status reached onData"


async def _until_open(url: str, session: str) -> None:
    """Once the session has an open turn (the resume GET answers 200, not 204)."""
    async with httpx.AsyncClient(timeout=10.0) as client:
        for _ in range(200):
            async with client.stream("GET", url, headers=auth(session)) as response:
                if response.status_code == 200:
                    return
                assert response.status_code == 204
            await asyncio.sleep(0.05)
    raise AssertionError("the turn never opened")
