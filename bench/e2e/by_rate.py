"""CPU and added latency by rate: what a deployment pays at the loads users run, not only at
the drain (issue "Cheap at the loads users run", item 2).

For each rate (1k, 5k, 10k and 30k events/s, and 20, 30 and 40% of the measured one-worker
drain), the latency phase (`bench.e2e.phases.latency_phase`) publishes at that rate through one
worker and straight to the session streams (the raw loop, the floor). A row keeps the added
latency (terminus minus the raw loop at the same percentile), the raw loop's p99, and the
worker's and Redis's CPU per event. An idle phase measures what a worker burns at 0 events/s.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from bench.common.procs import machine_busy_s
from bench.common.redis_ops import wait_owned
from bench.e2e.phases import START_TIMEOUT_S, Run, latency_phase

RATES: Final = (1_000, 5_000, 10_000, 30_000)
DRAIN_SHARES: Final = (0.2, 0.3, 0.4)
IDLE_S: Final = 10.0
BOUND_MS: Final = 10.0


def rates_for(drain_rate: float, chosen: tuple[float, ...] | None = None) -> list[float]:
    """The rates to try: the fixed ones below the drain, and shares of the drain."""
    if chosen:
        return sorted(set(chosen))
    fixed = [float(r) for r in RATES if r < drain_rate]
    return sorted({*fixed, *(round(drain_rate * share, -2) for share in DRAIN_SHARES)})


def row(rate: float, report: dict[str, Any]) -> dict[str, Any]:
    def added(name: str) -> float | None:
        ours, base = report.get(f"{name}_ms"), report.get(f"baseline_{name}_ms")
        return None if ours is None or base is None else ours - base

    return {
        "rate": rate,
        "achieved": report["latency_achieved_events_per_s"],
        "p50_ms": added("p50"),
        "p99_ms": added("p99"),
        "p999_ms": added("p999"),
        "worker_cpu_us_per_event": report["latency_worker_cpu_us_per_event"],
        "redis_cpu_us_per_event": report["latency_redis_cpu_us_per_event"],
        "raw_p99_ms": report["baseline_p99_ms"],
    }


async def idle_phase(run: Run) -> dict[str, Any]:
    """One worker holding every partition with nothing to do, for `IDLE_S`: its CPU share."""
    prefix, partitions = run.new_prefix("idle"), run.args.partitions
    with run.pool(prefix, 1) as pool:
        await wait_owned(run.redis, prefix, partitions, START_TIMEOUT_S)
        await asyncio.sleep(1.0)  # past the start: the takeover, the drains, the first waits
        before, machine = pool.cpu_seconds(), machine_busy_s()
        await asyncio.sleep(IDLE_S)
        after, machine_after = pool.cpu_seconds(), machine_busy_s()
        pool.check_alive()
    await run.drop_keys()
    worker = None if before is None or after is None else (sum(after) - sum(before)) / IDLE_S
    busy = None if machine is None or machine_after is None else (machine_after - machine) / IDLE_S
    return {"idle_worker_cores": worker, "idle_machine_busy_cores": busy}


async def by_rate_phase(run: Run, drain: dict[str, Any]) -> dict[str, Any]:
    """The `by_rate` table, the drain's CPU per event and the highest rate within the bound."""
    drain_rate = float(drain["e2e_events_per_s_1w"])
    rows = [
        row(rate, await latency_phase(run, rate)) for rate in rates_for(drain_rate, run.args.rates)
    ]
    worker, redis = drain["worker_cpu_us_per_event_1w"], drain["redis_cpu_us_per_event_1w"]
    within = [r["rate"] for r in rows if r["p99_ms"] is not None and r["p99_ms"] <= BOUND_MS]
    return {
        "by_rate": rows,
        "drain_cpu_us_per_event": None if worker is None else worker + redis,
        "max_rate_p99_le_10ms": max(within, default=None),
        "max_rate_p99_le_10ms_share_of_drain": max(within, default=0.0) / drain_rate,
        **await idle_phase(run),
    }
