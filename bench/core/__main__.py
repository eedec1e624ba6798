"""Throughput of the pure core (decode, fold, machine, projection) on a generated workload.

    python -m bench.core [--turns 1000] [--deltas 100] [--seed 1] [--repeat 5] [--json]

Every rate is events per second, best of `--repeat` runs, on one core. The workload is generated
and encoded to JSON before any timing; correctness (every turn `finished`, deltas fire no
trigger) is asserted after the timed runs. The 300,000 events/s target is reported, not asserted.
"""

from __future__ import annotations

import argparse
import gc
import platform
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from importlib.metadata import version
from time import perf_counter
from typing import Any, Final

import msgspec

from bench.common.output import emit
from bench.common.workload import delta_workload, encode, generate
from terminus.events.codec import decode_event
from terminus.events.inbound import InboundEvent, TextDelta
from terminus.statemachines.config import DEFAULT_CONFIG, CoreConfig
from terminus.statemachines.fold import evolve
from terminus.statemachines.outputs import Outputs
from terminus.statemachines.states import TurnState
from terminus.statemachines.table import advance
from terminus.statemachines.turn import Turn

TARGET_EVENTS_PER_S: Final = 300_000
ADVANCE_CALLS: Final = 20_000
DESCRIPTION: Final = "Throughput of the pure core of terminus on a generated workload."

Turns = dict[str, Turn]


class MachineStats(msgspec.Struct, frozen=True, kw_only=True):
    """What reached the Machine in one untimed run: events that changed state, and the calls."""

    state_changes: int
    transitions: int
    triggers: dict[str, int]
    calls: list[tuple[TurnState, str]]


def batches(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    """Slices of `size` items: the runtime commits one `Outputs` per batch it reads."""
    return [items[i : i + size] for i in range(0, len(items), size)]


def clear(out: Outputs) -> None:
    """Empty the sink after a batch, as the shell does once it has committed the outputs."""
    for produced in (out.frames, out.commands, out.messages, out.partials, out.transitions):
        produced.clear()
    out.ignored.clear()


def timed(run: Callable[[], Any], repeat: int) -> float:
    """The best wall time of `repeat` calls, each after a full collection."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = perf_counter()
        run()
        best = min(best, perf_counter() - start)
    return best


def decode_all(raws: Iterable[bytes]) -> None:
    for raw in raws:
        decode_event(raw)


def msgspec_all(raws: Iterable[bytes]) -> None:
    decoder = msgspec.json.Decoder(InboundEvent)
    for raw in raws:
        decoder.decode(raw)


def core_all(
    chunks: Iterable[Sequence[bytes]], turns: Turns, config: CoreConfig = DEFAULT_CONFIG
) -> Turns:
    """Decode then fold every event, one reused sink per batch; the timed body of the core."""
    out = Outputs()
    for chunk in chunks:
        for raw in chunk:
            event = decode_event(raw)
            turns[event.turn_id], _ = evolve(turns.get(event.turn_id), event, config, out)
        clear(out)
    return turns


def fold_all(
    chunks: Iterable[Sequence[InboundEvent]], turns: Turns, config: CoreConfig = DEFAULT_CONFIG
) -> Turns:
    """`core_all` on events decoded beforehand: the machine and projections alone."""
    out = Outputs()
    for chunk in chunks:
        for event in chunk:
            turns[event.turn_id], _ = evolve(turns.get(event.turn_id), event, config, out)
        clear(out)
    return turns


def timed_fold(
    run: Callable[[Turns], Turns], setup: Callable[[], Turns], repeat: int
) -> tuple[float, Turns]:
    """Best time of `run` on a fresh turn table from `setup` (not timed), and the last table."""
    best, turns = float("inf"), {}
    for _ in range(repeat):
        turns = setup()
        gc.collect()
        start = perf_counter()
        run(turns)
        best = min(best, perf_counter() - start)
    return best, turns


def machine_stats(events: Sequence[InboundEvent]) -> MachineStats:
    """Fold once, untimed, watching each event's transitions."""
    turns: Turns = {}
    out = Outputs()
    changing, triggers = 0, Counter[str]()
    for event in events:
        seen = len(out.transitions)
        turns[event.turn_id], _ = evolve(turns.get(event.turn_id), event, DEFAULT_CONFIG, out)
        changing += len(out.transitions) > seen
    triggers.update(t.trigger for t in out.transitions)
    calls = [(TurnState(t.source), t.trigger) for t in out.transitions]
    return MachineStats(
        state_changes=changing, transitions=len(calls), triggers=dict(triggers), calls=calls
    )


def advance_all(calls: Sequence[tuple[TurnState, str]]) -> None:
    for state, trigger in calls:
        advance(state, trigger)


def trigger_seconds(calls: list[tuple[TurnState, str]], repeat: int) -> float:
    """Seconds per `advance` call, cycling through the calls the workload really makes."""
    sample = (calls * (ADVANCE_CALLS // max(len(calls), 1) + 1))[:ADVANCE_CALLS]
    return timed(lambda: advance_all(sample), repeat) / len(sample)


def check_finished(turns: Turns, expected: int) -> None:
    states = Counter(turn.state.value for turn in turns.values())
    assert len(turns) == expected, f"{len(turns)} turns folded, {expected} generated"
    assert states == {"finished": expected}, f"not every turn finished: {dict(states)}"
    ignored = sum(sum(turn.ignored.values()) for turn in turns.values())
    assert ignored == 0, f"{ignored} events ignored; the workload has no duplicates"


def check_no_trigger(prelude: Sequence[InboundEvent], deltas: Sequence[InboundEvent]) -> None:
    """Deltas never reach the Machine: folding them records no transition at all."""
    turns = fold_all([prelude], {})
    out = Outputs()
    for event in deltas:
        assert isinstance(event, TextDelta)
        turns[event.turn_id], _ = evolve(turns[event.turn_id], event, DEFAULT_CONFIG, out)
    assert not out.transitions, f"{len(out.transitions)} transitions fired by deltas"
    assert len(out.frames) == len(deltas)


def measure_core(args: argparse.Namespace, events: list[InboundEvent]) -> dict[str, Any]:
    """Decode, core and fold-only rates on the mixed workload, checked after timing."""
    raws = encode(events)
    raw_chunks, event_chunks = batches(raws, args.batch), batches(events, args.batch)
    core_s, turns = timed_fold(lambda t: core_all(raw_chunks, t), dict, args.repeat)
    check_finished(turns, args.turns)
    fold_s, turns = timed_fold(lambda t: fold_all(event_chunks, t), dict, args.repeat)
    check_finished(turns, args.turns)
    n = len(events)
    return {
        "events": n,
        "text_deltas": sum(isinstance(e, TextDelta) for e in events),
        "bytes_per_event": round(sum(map(len, raws)) / n, 1),
        "decode_events_per_s": n / timed(lambda: decode_all(raws), args.repeat),
        "msgspec_decode_events_per_s": n / timed(lambda: msgspec_all(raws), args.repeat),
        "core_events_per_s": n / core_s,
        "fold_events_per_s": n / fold_s,
        "finished_turns": len(turns),
    }


def measure_machine(
    args: argparse.Namespace, events: list[InboundEvent], core_events_per_s: float
) -> dict[str, Any]:
    """How many events reach the Machine, and what one `advance` costs."""
    stats = machine_stats(events)
    per_call = trigger_seconds(stats.calls, args.repeat)
    core_s = len(events) / core_events_per_s
    return {
        "state_changes": stats.state_changes,
        "transitions": stats.transitions,
        "triggers": stats.triggers,
        "trigger_us": per_call * 1e6,
        "trigger_share_of_core": stats.transitions * per_call / core_s,
    }


def measure_deltas(args: argparse.Namespace) -> dict[str, Any]:
    """Deltas alone, into turns opened beforehand: decode + fold, and fold only."""
    prelude, deltas = delta_workload(args.seed, args.turns, args.deltas)
    check_no_trigger(prelude, deltas)
    raw_chunks, event_chunks = batches(encode(deltas), args.batch), batches(deltas, args.batch)

    def opened() -> Turns:
        return fold_all([prelude], {})

    core_s, _ = timed_fold(lambda t: core_all(raw_chunks, t), opened, args.repeat)
    fold_s, _ = timed_fold(lambda t: fold_all(event_chunks, t), opened, args.repeat)
    return {
        "delta_events": len(deltas),
        "delta_path_events_per_s": len(deltas) / core_s,
        "delta_fold_events_per_s": len(deltas) / fold_s,
        "delta_transitions": 0,
    }


def environment(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "msgspec_version": version("msgspec"),
        "transitions_version": version("transitions"),
        "machine": platform.machine(),
        "turns": args.turns,
        "deltas": args.deltas,
        "seed": args.seed,
        "repeat": args.repeat,
        "batch": args.batch,
        "target_events_per_s": TARGET_EVENTS_PER_S,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every measurement, as one flat report."""
    report = environment(args)
    events = generate(args.seed, args.turns, args.deltas)
    report.update(measure_core(args, events))
    report.update(measure_machine(args, events, report["core_events_per_s"]))
    report.update(measure_deltas(args))
    report["target_met"] = report["core_events_per_s"] >= TARGET_EVENTS_PER_S
    return report


RATE_ROWS: Final = (
    ("decode only (terminus.events.codec.decode_event)", "decode_events_per_s"),
    ("  msgspec Decoder alone, for reference", "msgspec_decode_events_per_s"),
    ("decode + fold + projection (core)", "core_events_per_s"),
    ("fold + projection, pre-decoded", "fold_events_per_s"),
    ("delta path: decode + fold", "delta_path_events_per_s"),
    ("delta path: fold only", "delta_fold_events_per_s"),
)


def table(r: dict[str, Any]) -> str:
    """The report as a table a person reads."""
    lines = [
        f"terminus core benchmark: Python {r['python']} ({r['machine']}), "
        f"msgspec {r['msgspec_version']}, transitions {r['transitions_version']}",
        f"workload: {r['turns']:,} turns, {r['events']:,} events ({r['text_deltas']:,} text "
        f"deltas, {r['bytes_per_event']} B/event), seed {r['seed']}, batch {r['batch']}, "
        f"best of {r['repeat']}",
        "",
        f"{'path':<42}{'events/s':>12}{'us/event':>10}",
    ]
    for label, key in RATE_ROWS:
        lines.append(f"{label:<42}{r[key]:>12,.0f}{1e6 / r[key]:>10.2f}")
    lines += machine_lines(r)
    return "\n".join(lines)


def machine_lines(r: dict[str, Any]) -> list[str]:
    verdict = "met" if r["target_met"] else "NOT met"
    triggers = ", ".join(f"{k} {v:,}" for k, v in sorted(r["triggers"].items()))
    return [
        "",
        f"state-changing events: {r['state_changes']:,} of {r['events']:,} "
        f"({r['state_changes'] / r['events']:.1%}); {r['transitions']:,} transitions",
        f"  triggers: {triggers}",
        f"terminus.statemachines.table.advance: {r['trigger_us']:.2f} us/call, "
        f"{r['trigger_share_of_core']:.1%} of core time",
        f"delta path: {r['delta_events']:,} deltas fired {r['delta_transitions']} transitions",
        f"target core >= {r['target_events_per_s']:,} events/s: {verdict} "
        f"({r['core_events_per_s']:,.0f})",
        f"finished turns: {r['finished_turns']:,} of {r['turns']:,}",
    ]


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.core", description=DESCRIPTION)
    parser.add_argument("--turns", type=int, default=1000, help="turns in the workload")
    parser.add_argument("--deltas", type=int, default=100, help="mean text deltas per attempt")
    parser.add_argument("--seed", type=int, default=1, help="seed of the workload generator")
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement; best kept")
    parser.add_argument("--batch", type=int, default=100, help="events per Outputs sink")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    report = run(args)
    emit(report, args.json, table)


if __name__ == "__main__":
    main()
