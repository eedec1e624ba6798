"""What a worker's own work on a batch costs by the batch's size, without Redis:
`python -m bench.fold [--sizes 1,3,10,100,512] [--turns 400] [--deltas 60] [--repeat 3] [--json]`.

Why: at light load a commit carries one to three entries, and the worker's per-batch work (a
batch, its outputs and counters, the snapshots of the turns it touched, the encoding of the
commit) is paid per few entries where the drain pays it per hundreds. End-to-end runs at 1,000
events/s move by a third between runs of the same code on the 2-core benchmark machine
(docs/performance.md), too much to see a change of a few µs per commit; this times that work
alone, in one process, the way a worker does it for each batch it reads:

    decode_entries -> PartitionFold.apply -> encode (commit.lua's KEYS and ARGV) -> settle

The workload is bench/common/workload.py's, its entries cut into batches of each size in log
order. Every figure is the best of `--repeat` runs of the whole log, in µs per event and per
batch; `fixed_us_per_batch` is what a batch costs beyond its events at the largest size's rate.
The figures are hot-loop ones: in a worker at light load the same code runs between other
processes' turns on the cores, and took two to three times as long (docs/performance.md).
"""

from __future__ import annotations

import argparse
import gc
from collections.abc import Sequence
from time import perf_counter
from typing import Any, Final, NamedTuple

from bench.common.output import emit
from bench.common.workload import encode as encode_events
from bench.common.workload import generate
from terminus.service.fold.applier import Entry, PartitionFold, Timeouts, decode_entries
from terminus.service.fold.commit import encode
from terminus.service.keys import Keys
from terminus.service.settings import Settings

SIZES: Final = (1, 3, 10, 100, 512)
BASE_MS: Final = 1_767_225_600_000  # entry ids from here, one millisecond apart
LEASE: Final = "bench-worker:1"
DESCRIPTION: Final = "A worker's decode, fold and commit encoding per batch, by batch size."


def entries_of(args: argparse.Namespace) -> list[Entry]:
    """The workload's events as the read scripts return log entries."""
    raws = encode_events(generate(args.seed, args.turns, args.deltas))
    return [Entry(f"{BASE_MS + n}-0", raw) for n, raw in enumerate(raws)]


class Pass(NamedTuple):
    """One fold of the whole log: seconds in each step, and what would make its figures wrong."""

    spent: dict[str, float]
    dead: int  # entries dead-lettered: none, on the generated workload
    open_turns: int  # turns not final at the end: none (final turns leave memory on settle)


def one_pass(entries: Sequence[Entry], size: int, settings: Settings) -> Pass:
    """The whole log folded in batches of `size`, as a worker folds what it reads."""
    keys = Keys(0, settings.prefix)
    timeouts = Timeouts(settings.stall_timeout_ms, settings.tool_timeout_ms)
    fold = PartitionFold(keys, settings.core(), timeouts, settings.session_maxlen)
    spent = {"decode": 0.0, "fold": 0.0, "encode": 0.0}
    dead = 0
    gc.collect()
    for first in range(0, len(entries), size):
        started = perf_counter()
        decoded = decode_entries(entries[first : first + size], settings.max_deliveries)
        decoded_at = perf_counter()
        batch, stats = fold.apply(decoded)
        folded_at = perf_counter()
        encode(batch, keys, LEASE, "bench-worker", settings.batch_size, entries[first].id)
        fold.settle()
        spent["decode"] += decoded_at - started
        spent["fold"] += folded_at - decoded_at
        spent["encode"] += perf_counter() - folded_at
        dead += stats.dead
    return Pass(spent, dead, len(fold.turns))


def measure(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings()
    entries = entries_of(args)
    rows = []
    for size in args.sizes:
        passes = [one_pass(entries, size, settings) for _ in range(args.repeat)]
        wrong = [p for p in passes if p.dead or p.open_turns]
        if wrong:
            raise RuntimeError(
                f"batches of {size}: {wrong[0].dead} dead letters, "
                f"{wrong[0].open_turns} turns left open"
            )
        best = min((p.spent for p in passes), key=lambda spent: sum(spent.values()))
        batches = -(-len(entries) // size)
        total = sum(best.values())
        rows.append(
            {
                "size": size,
                "batches": batches,
                "us_per_event": total * 1e6 / len(entries),
                "us_per_batch": total * 1e6 / batches,
                **{f"{step}_us_per_event": s * 1e6 / len(entries) for step, s in best.items()},
            }
        )
    floor = rows[-1]["us_per_event"]  # the largest size's rate: what an event costs on its own
    for row in rows:
        row["fixed_us_per_batch"] = (row["us_per_event"] - floor) * row["size"]
    return {"events": len(entries), "seed": args.seed, "repeat": args.repeat, "rows": rows}


def table(report: dict[str, Any]) -> str:
    lines = [
        f"{report['events']:,} events, seed {report['seed']}, best of {report['repeat']}",
        f"{'batch':>6}{'us/event':>10}{'decode':>8}{'fold':>8}{'encode':>8}{'us/batch':>10}"
        f"{'fixed':>8}",
    ]
    for r in report["rows"]:
        lines.append(
            f"{r['size']:>6}{r['us_per_event']:>10.1f}{r['decode_us_per_event']:>8.1f}"
            f"{r['fold_us_per_event']:>8.1f}{r['encode_us_per_event']:>8.1f}"
            f"{r['us_per_batch']:>10.1f}{r['fixed_us_per_batch']:>8.1f}"
        )
    return "\n".join(lines)


def sizes(text: str) -> list[int]:
    values = sorted({int(v) for v in text.split(",") if v.strip()})
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError("batch sizes are positive integers")
    return values


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.fold", description=DESCRIPTION)
    parser.add_argument("--sizes", type=sizes, default=list(SIZES), help="batch sizes, a,b,..")
    parser.add_argument("--turns", type=int, default=400, help="turns in the workload")
    parser.add_argument("--deltas", type=int, default=60, help="mean text deltas per attempt")
    parser.add_argument("--seed", type=int, default=1, help="seed of the workload generator")
    parser.add_argument("--repeat", type=int, default=3, help="runs per size; best kept")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    report = measure(args)
    emit(report, args.json, table)


if __name__ == "__main__":
    main()
