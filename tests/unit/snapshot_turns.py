"""What the snapshot tests share: the core's config, a turn's whole encoding, folding events
into a turn, a turn with a text part streaming, and the lines of a stored tail."""

from __future__ import annotations

from typing import Final

import msgspec
from factories import Script

from terminus.events.inbound import InboundEvent, TextDelta, TextStart
from terminus.statemachines.config import CoreConfig
from terminus.statemachines.fold import evolve
from terminus.statemachines.retry_policy import RetryPolicy
from terminus.statemachines.turn import Turn

CONFIG: Final = CoreConfig(retry=RetryPolicy(max_attempts=4))
BASE: Final = msgspec.msgpack.Decoder(Turn)


def encode(turn: Turn | None) -> bytes:
    return msgspec.msgpack.encode(turn)


def streaming(deltas: int, marker: str = "zebra") -> tuple[Turn, list[InboundEvent]]:
    """A turn with a text part open, and `deltas` more deltas to fold into it."""
    script = Script()
    script.emit(TextStart, part_id="a")
    opened = len(script.events)
    for n in range(deltas):
        script.emit(TextDelta, part_id="a", delta=f"{marker}-{n};")
    turn = fold(script.events[:opened])
    return turn, script.events[opened:]


def fold(events: list[InboundEvent], turn: Turn | None = None) -> Turn:
    for event in events:
        turn, _ = evolve(turn, event, CONFIG)
    assert turn is not None
    return turn


def lines(tail: bytes | None) -> list[list[object]]:
    assert tail is not None
    assert tail.endswith(b"\n")
    return [msgspec.json.decode(line) for line in tail.splitlines()]
