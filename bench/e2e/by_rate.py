"""CPU and added latency by rate: what a deployment pays at the loads users run, not only at
the drain (issue "Cheap at the loads users run", item 2).

For each rate (1k, 5k, 10k and 30k events/s, 20, 30, 40 and 50% of the measured one-worker drain,
and 30 and 60% of the peer's), the latency phase (`bench.e2e.phases.latency_phase`) publishes at
that rate through one worker and straight to the session streams (the raw loop, the floor). A
row keeps the added latency (terminus minus the raw loop at the same percentile), the raw loop's
p99, and the worker's and Redis's CPU per event. Where the peer (bench/peer) was measured, so is
it, at the rates up to `PEER_SHARE` of its own drain: past that it falls behind for good. An
idle phase measures what a worker burns at 0 events/s.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from bench.common.procs import machine_busy_s
from bench.common.redis_ops import wait_owned
from bench.e2e.phases import START_TIMEOUT_S, Run, latency_phase

RATES: Final = (1_000, 5_000, 10_000, 30_000)
DRAIN_SHARES: Final = (0.2, 0.3, 0.4, 0.5)
IDLE_S: Final = 10.0
BOUND_MS: Final = 10.0
PERCEIVED_MS: Final = 20.0  # issue 37's bound: what a chat UI's user can perceive
PEER_SHARES: Final = (0.3, 0.6)  # rates at these shares of the peer's drain are tried too
PEER_SHARE: Final = 0.8  # the peer is measured at the rates up to this share of its drain


def rates_for(
    drain_rate: float, chosen: tuple[float, ...] | None = None, peer_rate: float | None = None
) -> list[float]:
    """The rates to try: the fixed ones below the drain, shares of the drain, and shares of the
    peer's drain (its curve needs rates it can carry)."""
    if chosen:
        return sorted(set(chosen))
    fixed = [float(r) for r in RATES if r < drain_rate]
    peer = [round(peer_rate * share, -2) for share in PEER_SHARES] if peer_rate else []
    return sorted({*fixed, *peer, *(round(drain_rate * share, -2) for share in DRAIN_SHARES)})


def row(rate: float, report: dict[str, Any]) -> dict[str, Any]:
    def added(name: str, who: str = "") -> float | None:
        """The latency `who` ("" for terminus, "peer_") adds over the raw loop at `name`."""
        value, base = report.get(f"{who}{name}_ms"), report.get(f"baseline_{name}_ms")
        return None if value is None or base is None else value - base

    worker, redis = (
        report["latency_worker_cpu_us_per_event"],
        report["latency_redis_cpu_us_per_event"],
    )
    raw = report["baseline_redis_cpu_us_per_event"]
    floor, floor_redis = (
        report.get("floor_cpu_us_per_event"),
        report.get("floor_redis_cpu_us_per_event"),
    )
    net = None if worker is None else worker + redis - raw
    floor_net = None if floor is None or floor_redis is None else floor + floor_redis - raw
    return {
        "rate": rate,
        "achieved": report["latency_achieved_events_per_s"],
        "p50_ms": added("p50"),
        "p99_ms": added("p99"),
        "p999_ms": added("p999"),
        "worker_cpu_us_per_event": report["latency_worker_cpu_us_per_event"],
        "redis_cpu_us_per_event": report["latency_redis_cpu_us_per_event"],
        "raw_p99_ms": report["baseline_p99_ms"],
        "raw_redis_cpu_us_per_event": raw,
        # Worker + Redis less the raw loop's Redis, which is the producer's and reader's own.
        "net_cpu_us_per_event": net,
        "machine_busy_cores": report["latency_machine_busy_cores"],
        "peer_p50_ms": added("p50", "peer_"),
        "peer_p99_ms": added("p99", "peer_"),
        "peer_p999_ms": added("p999", "peer_"),
        "peer_unseen": report.get("peer_unseen"),
        "peer_cpu_us_per_event": report.get("peer_cpu_us_per_event"),
        "floor_p99_ms": added("p99", "floor_"),
        "floor_cpu_us_per_event": floor,
        "floor_redis_cpu_us_per_event": floor_redis,
        # What terminus costs beyond reading, one frame per entry and acking, at this rate.
        "floor_net_cpu_us_per_event": floor_net,
        "net_over_floor": None if net is None or not floor_net else net / floor_net,
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
    peer_rate = drain.get("e2e_events_per_s_peer")
    rows = []
    for rate in rates_for(drain_rate, run.args.rates, peer_rate):
        # Past its drain the peer falls behind for good: its latency is the length of the run.
        peer = peer_rate is not None and rate <= PEER_SHARE * peer_rate
        rows.append(row(rate, await latency_phase(run, rate, peer, run.args.floor)))
    worker, redis = drain["worker_cpu_us_per_event_1w"], drain["redis_cpu_us_per_event_1w"]
    within = [r["rate"] for r in rows if r["p99_ms"] is not None and r["p99_ms"] <= BOUND_MS]
    within_20 = [r["rate"] for r in rows if r["p99_ms"] is not None and r["p99_ms"] <= PERCEIVED_MS]
    peer_within = [
        r["rate"] for r in rows if r["peer_p99_ms"] is not None and r["peer_p99_ms"] <= BOUND_MS
    ]
    return {
        "by_rate": rows,
        "peer_max_rate_p99_le_10ms": max(peer_within, default=None),
        "drain_cpu_us_per_event": None if worker is None else worker + redis,
        "max_rate_p99_le_10ms": max(within, default=None),
        "max_rate_p99_le_10ms_share_of_drain": max(within, default=0.0) / drain_rate,
        "max_rate_p99_le_20ms": max(within_20, default=None),
        "max_rate_p99_le_20ms_share_of_drain": max(within_20, default=0.0) / drain_rate,
        **await idle_phase(run),
    }
