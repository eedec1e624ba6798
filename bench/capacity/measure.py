"""The model's inputs, measured on this machine (`python -m bench.capacity --measure`).

- CPU per provider token, worker and Redis, at each of `loads` turns in flight: the realistic
  workload of `bench.e2e --realistic` (bench/e2e/realistic.py), one worker, on one Redis and
  again on a local 3-shard cluster (3 primaries, a replica each: `bench.e2e --cluster`'s).
- Bytes per token and per turn of every kind of key: the highest load's keys, weighed once its
  worker stopped (bench/capacity/footprint.py). Retention is off in that run, so the keys hold
  everything the run wrote; the model multiplies by the window.
- Gateway CPU per frame delivered to one subscriber: `bench.fanout` (a worker, a gateway and SSE
  clients), run as a child process at a reduced size.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import msgspec

from bench.capacity.footprint import Footprint, weigh
from bench.capacity.model import CostPoint, Inputs
from bench.e2e.__main__ import parse as e2e_parse
from bench.e2e.phases import Run
from bench.e2e.realistic import Then, realistic_phase
from bench.e2e.schedule import Schedule
from terminus.service.redis.connect import connect

FANOUT_ARGS: Final = ("--subscribers", "400", "--sessions", "40", "--rate", "1000")
FANOUT_TIMEOUT_S: Final = 600.0


class Where(msgspec.Struct, frozen=True, kw_only=True):
    """The Redis a measurement runs on: `url`, which the user gave or we started."""

    url: str
    given: bool
    cluster: bool = False


class Play(msgspec.Struct, frozen=True, kw_only=True):
    """How each realistic run plays: how long, from which seed, and how its producer publishes
    (`coalesce`: each network read's tokens as one delta, as the default producer does)."""

    seconds: float
    seed: int
    coalesce: bool = True


def e2e_args(where: Where, turns: int, play: Play) -> argparse.Namespace:
    """`bench.e2e --realistic`'s arguments for one run."""
    argv = ["--realistic", "--turns", str(turns), "--seconds", str(play.seconds)]
    argv += ["--seed", str(play.seed), *(["--coalesce-reads"] if play.coalesce else [])]
    argv += ["--redis-url", where.url] if where.given else []
    return e2e_parse([*argv, "--cluster"] if where.cluster else argv)


async def realistic(
    where: Where, turns: int, play: Play, log_dir: Path, then: Then | None = None
) -> dict[str, Any]:
    """One realistic run's report (`e2e_args`); its worker is stopped and its keys deleted
    whatever happens."""
    redis = connect(where.url, cluster=where.cluster)
    run = Run(e2e_args(where, turns, play), redis, where.url, log_dir)
    try:
        return await realistic_phase(run, then)
    finally:
        run.stop_all()
        await run.drop_keys()
        await redis.aclose()


def cost_point(report: dict[str, Any]) -> CostPoint:
    worker = report["realistic_worker_cpu_us_per_token"]
    if worker is None:
        raise RuntimeError("the worker's CPU cannot be read here (/proc is needed)")
    return CostPoint(
        turns=report["realistic_concurrent_turns"],
        tokens_per_s=report["realistic_tokens_per_s"],
        worker_us_per_token=worker,
        redis_us_per_token=report["realistic_redis_cpu_us_per_token"],
    )


class Weighed:
    """A `then` for `realistic_phase` that keeps the footprint of the run's keys."""

    def __init__(self, where: Where) -> None:
        self.where = where
        self.footprint: Footprint | None = None

    async def __call__(self, prefix: str, schedule: Schedule) -> None:
        redis = connect(self.where.url, cluster=self.where.cluster)
        try:
            self.footprint = await weigh(redis, prefix, schedule)
        finally:
            await redis.aclose()


async def cluster_costs(
    where: Where, loads: Sequence[int], play: Play, log_dir: Path
) -> list[dict[str, Any]]:
    """A realistic run at each load on a cluster."""
    return [await realistic(where, turns, play, log_dir) for turns in sorted(loads)]


async def costs_and_footprint(
    where: Where, loads: Sequence[int], play: Play, log_dir: Path
) -> tuple[list[dict[str, Any]], Footprint]:
    """A realistic run at each load, the highest last and weighed."""
    reports, weighed = [], Weighed(where)
    ordered = sorted(loads)
    for turns in ordered:
        then = weighed if turns == ordered[-1] else None
        reports.append(await realistic(where, turns, play, log_dir, then))
    assert weighed.footprint is not None
    return reports, weighed.footprint


def fanout(redis_url: str | None, seconds: float) -> dict[str, Any]:
    """`bench.fanout --json` at a reduced size, as a child process."""
    argv = [sys.executable, "-m", "bench.fanout", *FANOUT_ARGS, "--seconds", str(seconds)]
    argv += ["--json", *(["--redis-url", redis_url] if redis_url else [])]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=FANOUT_TIMEOUT_S)
    if done.returncode:
        raise RuntimeError(f"bench.fanout failed:\n{done.stderr[-2000:]}")
    report: dict[str, Any] = msgspec.json.decode(done.stdout.strip().splitlines()[-1])
    if report.get("subscriber_errors") or report.get("frames_lost"):
        # A gateway that refused subscribers, or lost frames, served fewer than it was asked to:
        # its CPU per frame would be of another load.
        raise RuntimeError(
            f"bench.fanout: {report.get('subscriber_errors')} subscriber errors, "
            f"{report.get('frames_lost')} frames lost; first error: "
            f"{report.get('first_subscriber_error')}"
        )
    return report


def inputs_of(
    reports: Sequence[dict[str, Any]],
    on_cluster: Sequence[dict[str, Any]],
    footprint: Footprint,
    gateway_us: float,
    how: dict[str, Any],
) -> Inputs:
    frames = sum(r["realistic_frames_per_token"] for r in reports) / len(reports)
    return Inputs(
        costs=tuple(cost_point(r) for r in reports),
        cluster_costs=tuple(cost_point(r) for r in on_cluster),
        bytes_per_token=footprint.per_token(),
        bytes_per_turn=footprint.per_turn(),
        tokens_per_turn=footprint.tokens / footprint.turns,
        frames_per_token=frames,
        gateway_us_per_frame=gateway_us,
        measured=how,
    )


async def measure(
    where: Where, cluster: Where | None, args: argparse.Namespace, log_dir: Path
) -> tuple[Inputs, dict[str, Any]]:
    """The inputs, and the reports they came from; costs on a cluster only with `cluster`."""
    play = Play(seconds=args.seconds, seed=args.seed, coalesce=not args.one_delta_per_token)
    reports, footprint = await costs_and_footprint(where, args.loads, play, log_dir)
    on_cluster = []
    if cluster is not None:
        on_cluster = await cluster_costs(cluster, args.loads, play, log_dir)
    if args.gateway_us is None:
        given = where.url if where.given else None
        fan = await asyncio.to_thread(fanout, given, args.fanout_seconds)
        gateway_us = fan["gateway_cpu_us_per_frame"]
    else:
        fan, gateway_us = {}, args.gateway_us
    how = {
        "date": datetime.date.today().isoformat(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "redis": "given" if where.given else "private redis-server, AOF everysec",
        "cluster": None if cluster is None else "private local cluster, 3 primaries + 3 replicas",
        "command": " ".join(["python -m bench.capacity", *sys.argv[1:]]),
        "loads_turns": sorted(args.loads),
        "seconds": args.seconds,
        "seed": args.seed,
        "producer": reports[0]["realistic_producer"],
        "footprint_tokens": footprint.tokens,
        "footprint_turns": footprint.turns,
        "footprint_keys": footprint.keys_by_kind,
        "fanout": {k: fan.get(k) for k in ("frames_per_s", "p99_ms", "cpu_cores_gateway")},
    }
    inputs = inputs_of(reports, on_cluster, footprint, gateway_us, how)
    return inputs, {"realistic": reports, "realistic_cluster": on_cluster, "fanout": fan}
