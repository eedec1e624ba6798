"""A sink's fold of one partition: the workers' own fold, kept in memory, told of every event.

The workers keep a final turn's snapshot in Redis, where a late event finds it and is ignored.
A sink's fold is its own and writes nothing to Redis, so it keeps a stub of each final turn
(its session and state: all a late event is judged on) until the archiver's release lets the
turn go, exactly as long as the workers keep the snapshot or its tombstone.
"""

from __future__ import annotations

from collections.abc import Sequence

from terminus.events.codec import encode_msgpack
from terminus.service.fold.applier import PartitionFold, Timeouts, decode_entries
from terminus.service.fold.decoding import Decoded, Entry
from terminus.service.fold.releases import TOMBSTONE, id_key
from terminus.service.keys import Keys
from terminus.service.settings import Settings
from terminus.service.sinks.rows import Row, rows_of
from terminus.statemachines.outputs import Outputs
from terminus.statemachines.states import FINAL_STATES
from terminus.statemachines.turn import Turn


class SinkFold:
    """Folds a partition's log from its start; returns the rows of the events after `written`."""

    def __init__(self, keys: Keys, settings: Settings, written: str) -> None:
        timeouts = Timeouts(settings.stall_timeout_ms, settings.tool_timeout_ms)
        self.fold = PartitionFold(keys, settings.core(), timeouts, settings.session_maxlen)
        self.fold.witness = self._witness
        self.settings = settings
        self.written = id_key(written)  # the database holds the rows of every event up to it
        self.finals: dict[str, bytes] = {}  # final turns: a stub snapshot, or the tombstone
        self._rows: list[Row] = []

    def apply(self, entries: Sequence[Entry], forced: dict[str, str]) -> list[Row]:
        """Fold `entries` (the next ones in log order); the rows of those after `written`."""
        s = self.settings
        decoded = decode_entries(entries, s.max_deliveries, forced, max_bytes=s.max_event_bytes)
        missing = self.fold.missing(decoded)
        if missing:
            self.fold.load({turn_id: self.finals.get(turn_id) for turn_id in missing})
        self._rows = []
        self.fold.apply(decoded)
        self._keep_finals(decoded)
        self.fold.settle()
        return self._rows

    def _witness(self, entry_id: str, turn: Turn, out: Outputs, since: tuple[int, ...]) -> None:
        if id_key(entry_id) > self.written:
            self._rows.extend(rows_of(entry_id, turn, out, since))

    def _keep_finals(self, decoded: list[Decoded]) -> None:
        fold = self.fold
        for turn_id, turn in fold.turns.items():
            if turn is None:
                if turn_id in fold.released:
                    self.finals[turn_id] = TOMBSTONE
            elif turn.state in FINAL_STATES:
                self.finals[turn_id] = _stub(turn)
        for item in decoded:
            for turn_id in item.release.forget if item.release is not None else ():
                self.finals.pop(turn_id, None)


def _stub(turn: Turn) -> bytes:
    """What a late event of a final turn is judged on: identity, state and position."""
    return encode_msgpack(
        Turn(
            session_id=turn.session_id,
            turn_id=turn.turn_id,
            state=turn.state,
            max_attempts=turn.max_attempts,
            step=turn.step,
            attempt=turn.attempt,
            last_seq=turn.last_seq,
        )
    )
