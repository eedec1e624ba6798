"""The model's prediction for a local 3-shard Redis Cluster, against a run of that cluster
(`python -m bench.capacity --check-cluster`).

The cluster is `LocalCluster` as `bench.e2e --cluster` starts it: 3 primaries and a replica
each, AOF everysec, on this machine. One worker plays the realistic workload at `--check-turns`
turns in flight. Before the run, the model predicts from the inputs alone (measured on one
Redis or cluster): the worker's and Redis's CPU per provider token at the schedule's load,
Redis's summed over the primaries, and the bytes its keys hold. The CPU is predicted from the
costs measured on a cluster at other loads (`--measure` runs 25, 50 and 100 turns; the check
60), and, for comparison, from those measured on one Redis: the model first assumed that
splitting the partitions over shards leaves a commit's cost as it is, and this check is what
showed it does not (docs/capacity.md). The run measures the same three: CPU from /proc and
INFO (primaries only, as the model counts them; the replicas' own CPU is in neither), bytes
from MEMORY USAGE of every key. Each ratio is measured / predicted; within 25% is the target.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import msgspec

from bench.capacity.footprint import written
from bench.capacity.measure import Play, Weighed, Where, realistic
from bench.capacity.model import Demand, Inputs, cost_at, curves, plan
from bench.e2e.arrivals import Model
from bench.e2e.schedule import Schedule, build

TOLERANCE: Final = 0.25


class Figures(msgspec.Struct, frozen=True, kw_only=True):
    """What the check compares: CPU per token and the bytes the keys hold."""

    worker_us_per_token: float
    redis_us_per_token: float
    bytes: float


def predict(inputs: Inputs, schedule: Schedule, cluster: bool = True) -> Figures:
    """The model's figures for `schedule` played through one worker, from the costs measured
    on a cluster (at other loads than this one), or with `cluster` False on one Redis."""
    load = schedule.tokens / schedule.model.seconds
    worker, redis = curves(inputs, cluster)
    tokens, _ = written(schedule)
    return Figures(
        worker_us_per_token=cost_at(worker, load),
        redis_us_per_token=cost_at(redis, load),
        bytes=tokens * inputs.total_bytes_per_token,
    )


def compare(predicted: Figures, measured: Figures) -> dict[str, Any]:
    """Measured / predicted for each figure, and whether each is within `TOLERANCE`."""
    out: dict[str, Any] = {}
    for name in ("worker_us_per_token", "redis_us_per_token", "bytes"):
        ratio = getattr(measured, name) / getattr(predicted, name)
        out[name] = {
            "predicted": getattr(predicted, name),
            "measured": getattr(measured, name),
            "ratio": ratio,
            "within_25pct": abs(ratio - 1) <= TOLERANCE,
        }
    return out


async def check_once(
    where: Where, inputs: Inputs, turns: int, play: Play, log_dir: Path
) -> dict[str, Any]:
    """One prediction and one run of the cluster."""
    schedule = build(Model(turns=turns, seconds=play.seconds), play.seed)
    predicted, from_one = predict(inputs, schedule), predict(inputs, schedule, cluster=False)
    weighed = Weighed(where)
    report = await realistic(where, turns, play, log_dir, weighed)
    assert weighed.footprint is not None
    measured = Figures(
        worker_us_per_token=report["realistic_worker_cpu_us_per_token"],
        redis_us_per_token=report["realistic_redis_cpu_us_per_token"],
        bytes=weighed.footprint.total_bytes,
    )
    tokens_per_s = report["realistic_tokens_per_s"]
    demand = Demand(concurrent_turns=turns, tokens_per_s_per_turn=tokens_per_s / turns)
    return {
        "turns": turns,
        "concurrent_turns": report["realistic_concurrent_turns"],
        "tokens_per_s": tokens_per_s,
        "tokens": report["realistic_tokens"],
        "redis_forks": report["realistic_redis_forks"],
        "late_p99_ms": report["realistic_late_p99_ms"],
        "model_plan": msgspec.to_builtins(plan(demand, inputs)),
        "figures": compare(predicted, measured),
        "from_one_redis_costs": compare(from_one, measured),
    }


def verdict(runs: list[dict[str, Any]]) -> bool:
    """Every figure of every run within the tolerance."""
    return all(f["within_25pct"] for run in runs for f in run["figures"].values())
