"""Every kind of chunk the projection makes, checked by the `ai` package's own schema
(`uiMessageChunkSchema`, tests/frontends): ai 6 and 7 accept all of `hold`; ai 6 rejects
`reset-step` and nothing else, which is why `reset` is only sent to a client that asks."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Final

import msgspec
import pytest
from factories import Script, fold

from terminus.service.frontends.chunks import Chunk
from terminus.service.frontends.ui_stream import MODES, Mode, UiStream

FRONTENDS: Final = Path(__file__).resolve().parents[1] / "frontends"
NODE: Final = shutil.which("node")
AUTH_BODY: Final = {"type": "error", "error": {"type": "authentication_error", "message": "no"}}

pytestmark = pytest.mark.skipif(
    NODE is None or not (FRONTENDS / "node_modules").is_dir(),
    reason="needs node and tests/frontends' npm ci (.ci/setup)",
)


def every_kind() -> list[Script]:
    """A retried step with text, reasoning and each tool outcome; a failure; a cancel."""
    s = Script()
    s.text("a", "Hel")
    s.reasoning("r", "think")
    s.tool_input("c1")
    s.closed()
    s.next_attempt()
    s.reasoning("r2", "hmm", signature="sig")
    s.text("b", "Hello")
    s.tool_input("c2")
    s.tool_call("c2", q=1)
    s.tool_result("c2", "ok")
    s.tool_input("c3")
    s.tool_call("c3", q=2)
    s.tool_error("c3", "bad")
    s.tool_input("c4")
    s.prove("length", "max_tokens")
    failed = Script(max_attempts=1)
    failed.text("a", "x")
    failed.error(401, AUTH_BODY)
    cancelled = Script()
    cancelled.text("a", "x")
    cancelled.cancelled()
    return [s, failed, cancelled]


def live_chunks(mode: Mode) -> list[Chunk]:
    """The chunks of each turn, frame by frame as a live client gets them."""
    chunks: list[Chunk] = []
    for script in every_kind():
        turn, out = fold(script.events)
        stream = UiStream(turn.session_id, turn.turn_id, mode)
        chunks += stream.opening() + [c for f in out.frames for c in stream.apply(f)]
    return chunks


def rejected(version: str, chunks: list[Chunk]) -> list[str]:
    assert NODE is not None
    done = subprocess.run(
        [NODE, "read-ui-stream.mjs", version, "validate"],
        input=msgspec.json.encode(chunks),
        cwd=FRONTENDS,
        capture_output=True,
        timeout=60,
        check=True,
    )
    found: list[str] = json.loads(done.stdout)["rejected"]
    return found


def test_the_turns_make_every_kind_of_chunk() -> None:
    kinds = {msgspec.to_builtins(c)["type"] for mode in MODES for c in live_chunks(mode)}
    assert len(kinds) == len(Chunk.__subclasses__())


@pytest.mark.parametrize("version", ["ai6", "ai7"])
def test_every_held_chunk_is_one_the_sdk_accepts(version: str) -> None:
    assert rejected(version, live_chunks("hold")) == []


def test_reset_step_is_the_one_chunk_ai_6_rejects() -> None:
    chunks = live_chunks("reset")
    assert rejected("ai6", chunks) == ["reset-step"]
    assert rejected("ai7", chunks) == []
