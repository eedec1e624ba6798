"""The sink phase of the end-to-end benchmark (`--sink`): after a 1-worker drain of the
workload, `terminus sink --once` writes the log the workers committed into a new SQLite file;
its rows per second, and the same rows' rate in the drain (rows over drain seconds), side by
side, so that `sink_over_drain` says whether a sink keeps up with the workers it follows.

The sink runs as a user runs it, one process, timed from its spawn to its exit: Python's
start-up and the schema check are in `sink_s`. The drain is timed from the first entry read
(`sink_over_drain`) and from the workers' spawn (`sink_over_drain_from_spawn`, start-up in
both, the like-for-like figure for a short workload).
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from time import perf_counter
from typing import Any, Final

from bench.e2e.phases import Run, drain_phase
from terminus.events.inbound import InboundEvent

SINK: Final = (sys.executable, "-m", "terminus", "sink")
SUMMARY: Final = re.compile(r"(\d+) entries of \d+ partitions folded, (\d+) rows written, (\d+)")


def sink_env(run: Run, prefix: str) -> dict[str, str]:
    """The workers' environment, on the drained prefix, with no archive (retention is off)."""
    args = run.args
    env = dict(os.environ) | dict(item.split("=", 1) for item in args.worker_env)
    env |= {"REDIS_URL": run.url, "TERMINUS_PREFIX": prefix}
    env |= {
        "TERMINUS_PARTITIONS": str(args.partitions),
        "TERMINUS_BATCH_SIZE": str(args.batch_size),
    }
    env["TERMINUS_ARCHIVE_DIR"] = str(run.log_dir / "no-archive")
    if args.cluster:
        env["TERMINUS_REDIS_CLUSTER"] = "1"
    return env


async def sink_once(env: dict[str, str], url: str) -> dict[str, Any]:
    """`terminus sink migrate`, then `terminus sink --once` timed: its entries, rows, seconds."""
    migrate = await asyncio.create_subprocess_exec(  # its line would spoil `--json`
        *SINK, "migrate", "--to", url, env=env, stdout=asyncio.subprocess.DEVNULL
    )
    if await migrate.wait():
        raise RuntimeError(f"bench.e2e: terminus sink migrate --to {url} failed")
    start = perf_counter()
    process = await asyncio.create_subprocess_exec(
        *SINK, "--once", "--to", url, env=env, stdout=asyncio.subprocess.PIPE
    )
    out = (await process.communicate())[0].decode(errors="replace")
    seconds = perf_counter() - start
    found = SUMMARY.search(out)
    if process.returncode or found is None:
        raise RuntimeError(f"bench.e2e: terminus sink --once failed: {out[-500:]}")
    entries, rows, refused = (int(n) for n in found.groups())
    return {"sink_entries": entries, "sink_rows": rows, "sink_refused": refused, "sink_s": seconds}


async def sink_phase(run: Run, events: Sequence[InboundEvent]) -> dict[str, Any]:
    """A 1-worker drain of `events`, then the sink over the same log; the `sink_*` keys."""
    database = run.log_dir / f"sink-{len(run.prefixes)}.db"
    sunk: dict[str, Any] = {}

    async def then(prefix: str) -> None:
        sunk.update(await sink_once(sink_env(run, prefix), f"sqlite:///{database}"))

    drained = await drain_phase(run, events, 1, then=then)
    Path(database).unlink(missing_ok=True)
    return sink_report(sunk, drained)


def sink_report(sunk: dict[str, Any], drained: dict[str, Any]) -> dict[str, Any]:
    """The sink's rates, and their ratio to the drain's rates of the same rows."""
    rows, seconds = sunk["sink_rows"], sunk["sink_s"]
    drain_s = drained["drain_s_1w"]
    from_spawn_s = drain_s + drained["startup_s_1w"]
    return sunk | {
        "sink_rows_per_s": rows / seconds,
        "sink_events_per_s": sunk["sink_entries"] / seconds,
        "sink_drain_s": drain_s,
        "sink_drain_events_per_s": drained["e2e_events_per_s_1w"],
        "sink_drain_rows_per_s": rows / drain_s,
        "sink_over_drain": drain_s / seconds,
        "sink_over_drain_from_spawn": from_spawn_s / seconds,
    }
