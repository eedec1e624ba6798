"""Workloads of the end-to-end benchmark, sized in events, and the latency markers they carry.

The events are those of `bench.common.workload` (many interleaved turns, ~100 text deltas per
attempt, 10% truncated and retried, 8% with a tool call). For the latency run every delta also
carries a marker `~n~`, n its index in the list: the marker survives into the session frame the
delta becomes, so a reader can match each frame to the moment its event was published.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Final

import msgspec

from bench.common.workload import generate
from terminus.events.inbound import InboundEvent, ReasoningDelta, TextDelta
from terminus.statemachines.config import DEFAULT_CONFIG
from terminus.statemachines.fold import evolve
from terminus.statemachines.outputs import Outputs
from terminus.statemachines.turn import Turn

EVENTS_PER_TURN_BESIDES_DELTAS: Final = 25  # bench.common.workload: about 25 + `deltas` per turn
MARKER: Final = re.compile(rb"~(\d+)~")


def sized(seed: int, events: int, deltas: int) -> list[InboundEvent]:
    """About `events` events (whole turns, so a little more or less)."""
    per_turn = EVENTS_PER_TURN_BESIDES_DELTAS + deltas
    return generate(seed, max(1, math.ceil(events / per_turn)), deltas)


def marked(events: Iterable[InboundEvent], sessions: int) -> list[InboundEvent]:
    """Deltas with a `~n~` marker; turns spread over `sessions` session ids (`lat-<k>`), each
    turn in the next one in the order turns start, so a session rarely has two turns at once."""
    placed: dict[str, str] = {}
    result: list[InboundEvent] = []
    for n, event in enumerate(events):
        session = placed.setdefault(event.turn_id, f"lat-{len(placed) % sessions:04d}")
        if isinstance(event, TextDelta | ReasoningDelta):
            event = msgspec.structs.replace(event, delta=f"{event.delta} ~{n}~")
        result.append(msgspec.structs.replace(event, session_id=session))
    return result


def markers(raw: bytes) -> list[int]:
    """The event indexes marked in an entry's bytes."""
    return [int(m) for m in MARKER.findall(raw)]


def expected_frames(events: Iterable[InboundEvent]) -> int:
    """How many session frames the core makes of `events` (folded in order, in memory)."""
    turns: dict[str, Turn] = {}
    out = Outputs()
    frames = 0
    for event in events:
        turns[event.turn_id], _ = evolve(turns.get(event.turn_id), event, DEFAULT_CONFIG, out)
        frames += len(out.frames)
        out.frames.clear()
    return frames
