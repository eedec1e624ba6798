"""Turn snapshots as a base plus an appended tail (service/fold/snapshots.py), without Redis,
whatever the batching.

The property folds generated turns batch by batch, stores every touched turn through a
`TailLedger` into a dictionary that applies the batch's SET/APPEND/DEL ops as Redis would, and
checks that what is stored always loads back as the turn in memory, whatever the batch
boundaries, takeovers (a fresh ledger loading from the store) and failed commits (the batch's
writes lost, the ledger forgotten, the events folded again).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Final, Literal, get_args

import msgspec
from factories import Script
from hypothesis import given, settings
from hypothesis import strategies as st
from snapshot_turns import BASE, CONFIG, encode

from terminus.events.inbound import (
    InboundEvent,
    ReasoningDelta,
    ReasoningStart,
    TextDelta,
    TextStart,
)
from terminus.service.fold.commit import Batch
from terminus.service.fold.snapshots import Stored, TailLedger, assemble
from terminus.service.keys import Keys
from terminus.statemachines.errors import CoreError
from terminus.statemachines.fold import evolve
from terminus.statemachines.states import FINAL_STATES
from terminus.statemachines.turn import Turn

PROPERTY: Final = settings(max_examples=200, deadline=None)
KEYS: Final = Keys(3, "unit")

Ending = Literal["open", "stop", "tool", "closed", "error", "stalled", "cancelled"]
Action = Literal["commit", "takeover", "failed"]
# Part ids a tail line must carry intact: digits only, a quote, a backslash, a newline.
PARTS: Final = (("a", "text"), ("r", "reasoning"), ("7", "text"), ('q"\\\n', "reasoning"))
DELTAS: Final = st.text(max_size=6)  # any code point: quotes, newlines, U+2028, astral ones


class Attempt(msgspec.Struct, frozen=True):
    """One generated attempt: parts started up front, deltas as (part index, text), its end."""

    started: frozenset[int]
    deltas: list[tuple[int, str]]
    tool: bool
    ending: Ending


ATTEMPT: Final = st.builds(
    Attempt,
    st.frozensets(st.integers(0, len(PARTS) - 1)),
    st.lists(st.tuples(st.integers(0, len(PARTS) - 1), DELTAS), max_size=12),
    st.booleans(),
    st.sampled_from(get_args(Ending)),
)


def turn_events(turn_id: str, attempts: list[Attempt]) -> list[InboundEvent]:
    """A turn's events, attempt after attempt; the machine decides what each ending leads to."""
    script = Script(turn_id=turn_id, max_attempts=4)
    for n, attempt in enumerate(attempts):
        if n:
            after_tools = attempts[n - 1].ending == "tool"
            script.next_step() if after_tools else script.next_attempt()
        for part in sorted(attempt.started):
            part_id, kind = PARTS[part]
            script.emit(TextStart if kind == "text" else ReasoningStart, part_id=part_id)
        for part, delta in attempt.deltas:
            part_id, kind = PARTS[part]
            script.emit(
                TextDelta if kind == "text" else ReasoningDelta, part_id=part_id, delta=delta
            )
        if attempt.tool or attempt.ending == "tool":
            script.tool_input(f"call-{n}")
            script.tool_call(f"call-{n}", q="fold")
        end(script, attempt.ending, n)
    return script.events


def end(script: Script, ending: Ending, n: int) -> None:
    match ending:
        case "stop":
            script.prove()
        case "tool":
            script.finish("tool-calls", "tool_use")
            script.tool_result(f"call-{n}")
        case "closed":
            script.closed()
        case "error":
            script.error(429)
        case "stalled":
            script.stalled()
        case "cancelled":
            script.cancelled()
        case "open":
            pass


@dataclass
class Plan:
    """Every event of the turns in arrival order, cut into batches, each with its fate."""

    batches: list[tuple[list[InboundEvent], Action]] = field(default_factory=list)


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    """One to three interleaved turns, cut anywhere into batches."""
    turns: list[list[InboundEvent]] = []
    for t in range(draw(st.integers(1, 3))):
        attempts = draw(st.lists(ATTEMPT, min_size=1, max_size=4))
        last = next((n for n, a in enumerate(attempts) if a.ending in ("open", "stop")), None)
        turns.append(turn_events(f"t-{t}", attempts[: None if last is None else last + 1]))
    order = draw(st.permutations([t for t, events in enumerate(turns) for _ in events]))
    queues = [iter(events) for events in turns]
    events = [next(queues[t]) for t in order]
    cuts = draw(st.lists(st.booleans(), min_size=len(events), max_size=len(events)))
    actions = draw(
        st.lists(st.sampled_from(get_args(Action)), min_size=len(events), max_size=len(events))
    )
    plan, batch = Plan(), list[InboundEvent]()
    for event, cut, action in zip(events, cuts, actions, strict=True):
        batch.append(event)
        if cut:
            plan.batches.append((batch, action))
            batch = []
    if batch:
        plan.batches.append((batch, "commit"))
    return plan


class Store:
    """The string keys of Redis after the turn ops of committed batches: SET, APPEND, DEL."""

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}

    def commit(self, batch: Batch) -> None:
        for op, key, operands in batch.ops:
            if op == "D":
                self.values.pop(key, None)
                continue
            if op not in ("S", "A"):
                continue  # the open-turns set
            [value] = operands
            assert isinstance(value, bytes)
            self.values[key] = value if op == "S" else self.values.get(key, b"") + value

    def base(self, turn_id: str) -> bytes | None:
        return self.values.get(KEYS.turn(turn_id))

    def tail(self, turn_id: str) -> bytes | None:
        return self.values.get(KEYS.tail(turn_id))

    def load(self, turn_id: str) -> Turn | None:
        """The turn as a reader with no memory of it assembles it."""
        base = self.base(turn_id)
        return None if base is None else TailLedger().load(base, self.tail(turn_id))


class Owner:
    """A partition owner's memory: its turns and its ledger, loading what it lacks."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.ledger = TailLedger()
        self.turns: dict[str, Turn | None] = {}

    def fold(self, events: list[InboundEvent]) -> list[str]:
        """Fold a batch; the ids of the turns to store, as `PartitionFold` picks them."""
        touched: dict[str, None] = {}
        for event in events:
            if event.turn_id not in self.turns:
                base = self.store.base(event.turn_id)
                tail = self.store.tail(event.turn_id)
                self.turns[event.turn_id] = None if base is None else self.ledger.load(base, tail)
            # An illegal event is dead-lettered; a gap still moved the turn, so it is stored.
            with contextlib.suppress(CoreError):
                self.turns[event.turn_id], _ = evolve(self.turns[event.turn_id], event, CONFIG)
            if self.turns[event.turn_id] is not None:
                touched[event.turn_id] = None
        return list(touched)

    def batch(self, touched: list[str]) -> Batch:
        """The batch storing those turns; `store` leaves each turn in memory as it was."""
        batch = Batch()
        for turn_id in touched:
            turn = self.turns[turn_id]
            assert turn is not None
            before = encode(turn)
            stored = self.ledger.store(turn)
            assert encode(turn) == before, "store must put the open attempt's chunks back"
            check_stored(turn, stored)
            batch.add_turn(KEYS, turn, 0, stored)
        return batch

    def forget(self) -> None:
        self.turns.clear()
        self.ledger.forget()

    def settle(self) -> None:
        """After a commit, final turns leave memory, as `PartitionFold.settle` does."""
        for turn_id, turn in list(self.turns.items()):
            if turn is None or turn.state in FINAL_STATES:
                del self.turns[turn_id]
                self.ledger.forget(turn_id)


def check_stored(turn: Turn, stored: Stored) -> None:
    """A final turn is stored whole without a tail; an open one never carries its text."""
    if turn.state in FINAL_STATES:
        assert stored.base == encode(turn)
        assert stored.tail is None
        return
    base = BASE.decode(stored.base)
    if base.current is not None:
        assert all(not buf.chunks for buf in base.current.texts.values())


def run(plan: Plan) -> None:
    store = Store()
    owner = Owner(store)
    expected: dict[str, bytes] = {}
    for events, action in plan.batches:
        if action == "failed":  # the commit never landed: memory is dropped, entries redelivered
            owner.batch(owner.fold(events))
            owner.forget()
        touched = owner.fold(events)
        store.commit(owner.batch(touched))
        expected.update({t: encode(owner.turns[t]) for t in touched})
        owner.settle()
        if action == "takeover":
            owner = Owner(store)
        for turn_id, turn in expected.items():
            assert encode(store.load(turn_id)) == turn
            if BASE.decode(turn).state in FINAL_STATES:
                assert store.tail(turn_id) is None
    bases = {t: store.base(t) for t in expected}
    tails = {t: store.tail(t) for t in expected}
    assert {t: encode(turn) for t, turn in assemble(bases, tails).items()} == expected


@PROPERTY
@given(plans())
def test_any_batching_stores_what_loads_back_as_the_turn_in_memory(plan: Plan) -> None:
    run(plan)


def test_a_batch_that_replays_a_whole_retried_turn_round_trips() -> None:
    """Deterministic companion of the property: tail written, replaced, appended, dropped."""
    script = Script(max_attempts=4)
    script.text("a", "Hel", "lo\n")
    script.closed()
    script.next_attempt()
    script.reasoning("r", "th", "ink")
    script.text("a", "Hi", " there")
    script.prove()
    for size in (1, 2, 3, len(script.events)):
        plan = Plan()
        for start in range(0, len(script.events), size):
            plan.batches.append((script.events[start : start + size], "commit"))
        run(plan)
