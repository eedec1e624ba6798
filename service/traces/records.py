"""The inbound log folded turn by turn into what each event did, at the log's time.

A `Record` is one applied event with the transitions and frames it produced (text and reasoning
chunks left out: a trace counts no tokens of text). `Folder` holds the open turns of one
partition and hands back a turn's records once the turn is final. It runs the core's own `evolve`
with the deployment's core settings, so it decides what the workers decided; an event the core
rejects (which the workers dead-lettered) changes nothing here either.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from terminus.events.inbound import InboundEvent
from terminus.events.outbound import AgentMessageChunk, AgentThoughtChunk, SessionUpdate
from terminus.statemachines.config import DEFAULT_CONFIG, CoreConfig
from terminus.statemachines.errors import CoreError
from terminus.statemachines.fold import evolve
from terminus.statemachines.outputs import Outputs, Transition
from terminus.statemachines.states import FINAL_STATES
from terminus.statemachines.turn import Turn


class Record(msgspec.Struct, frozen=True, kw_only=True):
    """One event the core applied, at `at_ms` (its entry's time), and what it produced."""

    at_ms: int
    event: InboundEvent
    transitions: list[Transition]
    frames: list[SessionUpdate]


@dataclass
class _Open:
    turn: Turn
    records: list[Record] = field(default_factory=list)


@dataclass
class Folder:
    """The open turns of one partition, folded event by event."""

    config: CoreConfig = DEFAULT_CONFIG
    open: dict[str, _Open] = field(default_factory=dict)
    # Final turns are forgotten, their ids kept: a late `turn-started` must not reopen one.
    done: set[str] = field(default_factory=set)

    def apply(self, event: InboundEvent, at_ms: int) -> list[Record] | None:
        """Fold one event; the turn's records if it made the turn final, else None."""
        if event.turn_id in self.done:
            return None
        known = self.open.get(event.turn_id)
        out = Outputs()
        try:
            turn, _ = evolve(known.turn if known else None, event, self.config, out)
        except CoreError:  # rejection is pure: the turn is as it was
            return None
        opened = known or self.open.setdefault(event.turn_id, _Open(turn))
        if out.transitions or out.frames or known is None:
            opened.records.append(_record(at_ms, event, out))
        if turn.state not in FINAL_STATES:
            return None
        del self.open[event.turn_id]
        self.done.add(event.turn_id)
        return opened.records


def _record(at_ms: int, event: InboundEvent, out: Outputs) -> Record:
    frames: list[SessionUpdate] = [
        f for f in out.frames if not isinstance(f, AgentMessageChunk | AgentThoughtChunk)
    ]
    return Record(at_ms=at_ms, event=event, transitions=out.transitions, frames=frames)


def fold_turn(
    timed: list[tuple[int, InboundEvent]], config: CoreConfig = DEFAULT_CONFIG
) -> list[Record] | None:
    """The records of the one turn `timed` holds, if it ends final (for tests and tools)."""
    folder = Folder(config)
    for at_ms, event in timed:
        records = folder.apply(event, at_ms)
        if records is not None:
            return records
    return None
