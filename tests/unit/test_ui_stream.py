"""The AI SDK UI message stream of generated turns (DESIGN section 7): a pure fold of the frames
whose message, read as the SDK reads it, is the persisted message's text and nothing a
discarded attempt streamed, in both modes, however the frames are batched."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import msgspec
import pytest
from factories import Script, fold
from hypothesis import given
from hypothesis import strategies as st
from turn_generator import PROPERTY, GeneratedTurn, final_message, turns
from ui_reader import read

from terminus.events.outbound import PersistedMessage, ReasoningPart, SessionUpdate, TextPart
from terminus.service.frontends.chunks import (
    Abort,
    Chunk,
    ErrorChunk,
    Finish,
    MessageMetadata,
    ResetStep,
    Start,
    Status,
    encode,
)
from terminus.service.frontends.ui_stream import MODES, Mode, UiStream, project


def proven_text(message: PersistedMessage | None, kind: type[TextPart | ReasoningPart]) -> str:
    parts = message.parts if message is not None else []
    return "".join(p.text for p in parts if isinstance(p, kind))


def part_ids(chunk: Chunk) -> set[str]:
    """The part a chunk names, by the id the frames gave it."""
    named = msgspec.to_builtins(chunk)
    return {str(named[k]) for k in ("id", "toolCallId") if k in named} - {"terminus-status"}


def batched(
    session: str, turn: str, frames: Sequence[SessionUpdate], cuts: list[int], mode: Mode
) -> list[Chunk]:
    """The turn's chunks with the frames delivered in batches cut at `cuts`."""
    stream = UiStream(session, turn, mode)
    chunks = stream.opening()
    edges = [0, *sorted(c % (len(frames) + 1) for c in cuts), len(frames)]
    for low, high in itertools.pairwise(edges):
        chunks += stream.apply_all(frames[low:high])
    return chunks


def wire(chunks: list[Chunk]) -> bytes:
    return b"\n".join(encode(c) for c in chunks)


def discarded_ids(spec: GeneratedTurn) -> set[str]:
    kept = {(a.step, a.attempt) for a in spec.proven.values()}
    return {i for a in spec.attempts if (a.step, a.attempt) not in kept for i in a.part_ids}


@PROPERTY
@given(turns(), st.sampled_from(MODES), st.lists(st.integers(0, 400), max_size=6))
def test_the_stream_is_the_proven_message_however_batched(
    spec: GeneratedTurn, mode: Mode, cuts: list[int]
) -> None:
    turn, out = fold(spec.events)
    chunks = batched(turn.session_id, turn.turn_id, out.frames, cuts, mode)
    again = batched(turn.session_id, turn.turn_id, out.frames, cuts, mode)
    assert wire(chunks) == wire(again)
    message, persisted = read(chunks), final_message(out)
    assert message.text() == proven_text(persisted, TextPart)
    assert message.text("reasoning") == proven_text(persisted, ReasoningPart)
    assert not set(message.tools()) & discarded_ids(spec)
    assert isinstance(chunks[0], Start)
    assert chunks[0].message_id == f"msg-{turn.turn_id}"
    if mode == "hold":
        assert not any(isinstance(c, ResetStep) for c in chunks)
        whole = project(turn.session_id, turn.turn_id, out.frames, mode)
        assert wire(chunks) == wire(whole), "a held stream does not depend on batching"


@PROPERTY
@given(turns(), st.sampled_from(MODES))
def test_a_replayed_turn_names_no_part_of_a_discarded_attempt(
    spec: GeneratedTurn, mode: Mode
) -> None:
    turn, out = fold(spec.events)
    chunks = project(turn.session_id, turn.turn_id, out.frames, mode)
    named = set().union(*(part_ids(c) for c in chunks))
    assert not named & discarded_ids(spec)
    assert not any(isinstance(c, ResetStep) for c in chunks)


@PROPERTY
@given(turns())
def test_live_reset_withdraws_what_held_never_shows(spec: GeneratedTurn) -> None:
    """Frame by frame, as a live client reads it: `reset` shows every attempt and takes back
    the discarded ones; `hold` never names one."""
    turn, out = fold(spec.events)
    cuts = list(range(len(out.frames)))
    held = batched(turn.session_id, turn.turn_id, out.frames, cuts, "hold")
    live = batched(turn.session_id, turn.turn_id, out.frames, cuts, "reset")
    assert read(live).text() == read(held).text()
    assert not set().union(*(part_ids(c) for c in held)) & discarded_ids(spec)


def cut_and_retried() -> Script:
    s = Script()
    s.text("a", "Hello ", "wor")
    s.closed()
    s.next_attempt()
    s.text("b", "Hello ", "world")
    s.prove()
    return s


def types_of(chunks: list[Chunk]) -> list[str]:
    return [str(msgspec.to_builtins(c)["type"]) for c in chunks]


def test_a_cut_and_retried_turn_held_and_reset() -> None:
    turn, out = fold(cut_and_retried().events)
    stream = UiStream(turn.session_id, turn.turn_id, "reset")
    live = stream.opening() + [c for f in out.frames for c in stream.apply(f)]
    assert types_of(live) == [
        "start",
        "data-terminus-status",
        "start-step",
        "text-start",
        "text-delta",
        "text-delta",
        "reset-step",
        "data-terminus-status",
        "data-terminus-status",
        "text-start",
        "text-delta",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    held = project(turn.session_id, turn.turn_id, out.frames)
    statuses = [c.data.state for c in held if isinstance(c, Status)]
    assert statuses == ["streaming", "retrying", "streaming"]
    assert [c for c in held if isinstance(c, Status)][1].data.delay_ms is not None
    assert types_of(held)[-6:] == [
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    assert read(held).text() == read(live).text() == "Hello world"
    finish = held[-1]
    assert isinstance(finish, Finish)
    assert finish.finish_reason == "stop"
    assert finish.message_metadata is not None
    note = finish.message_metadata.terminus
    assert (note.steps, note.discarded, note.retries) == (1, 1, 1)
    assert note.usage is not None
    assert note.usage.output_tokens == 7


@pytest.mark.parametrize("mode", MODES)
def test_a_failed_turn_sends_its_typed_error_then_error_then_finish(mode: Mode) -> None:
    s = Script(max_attempts=1)
    s.text("a", "half an ans")
    s.error(401, {"type": "error", "error": {"type": "authentication_error", "message": "no"}})
    turn, out = fold(s.events)
    stream = UiStream(turn.session_id, turn.turn_id, mode)
    chunks = stream.opening() + [c for f in out.frames for c in stream.apply(f)]
    metadata, error, finish = chunks[-3:]
    assert isinstance(metadata, MessageMetadata)
    assert metadata.message_metadata.terminus.error is not None
    assert metadata.message_metadata.terminus.error.type == "auth"
    assert isinstance(error, ErrorChunk)
    assert error.error_text == metadata.message_metadata.terminus.error.message
    assert isinstance(finish, Finish)
    assert finish.finish_reason == "error"
    assert read(chunks).text() == "", "the failed attempt's text is not in the message"
    assert isinstance(chunks[-4], ResetStep) == (mode == "reset")


@pytest.mark.parametrize("mode", MODES)
def test_a_cancelled_turn_ends_with_abort(mode: Mode) -> None:
    s = Script()
    s.text("a", "never mind")
    s.cancelled()
    turn, out = fold(s.events)
    chunks = project(turn.session_id, turn.turn_id, out.frames, mode)
    assert isinstance(chunks[-1], Abort)
    assert isinstance(chunks[-2], MessageMetadata)
    assert chunks[-2].message_metadata.terminus.stop_reason == "cancelled"
    assert read(chunks).text() == ""


def test_frames_of_another_turn_add_nothing() -> None:
    turn, out = fold(cut_and_retried().events)
    assert (
        project(turn.session_id, "another-turn", out.frames)
        == UiStream(turn.session_id, "another-turn").opening()
    )
