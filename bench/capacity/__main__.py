"""How many workers, Redis shards, GB and cores a load needs (docs/capacity.md).

    python -m bench.capacity [--json] [--turns-per-s 50] [--subscribers 1] [--retain-s 600]
                             [--inputs bench/capacity/inputs.json]
    python -m bench.capacity --measure [--loads 25,50,100] [--seconds 10] [--gateway-us US]
                             [--one-delta-per-token]
    python -m bench.capacity --check-cluster [--check-turns 60] [--repeat 2]

Without flags: the worked examples (10k, 100k and 1M turns in flight) from the inputs committed
in `--inputs`. `--measure` measures the inputs on this machine first (bench/capacity/measure.py,
a few minutes) and writes them there. `--check-cluster` then predicts a local 3-shard cluster's
CPU and memory and runs it (bench/capacity/check.py). Redis is a private redis-server unless
`--redis-url` names one, and the cluster a private local one unless `--cluster-url` does. The
realistic runs publish as the default producer does, one delta per network read
(`coalesce_reads`); `--one-delta-per-token` publishes a delta per token instead.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import msgspec

from bench.capacity import check, report
from bench.capacity.measure import Play, Where, measure
from bench.capacity.model import Demand, Inputs, Limits, plan
from bench.common.procs import WorkerDied, raise_on_sigterm, redis_url

INPUTS: Final = Path(__file__).with_name("inputs.json")
EXAMPLES: Final = (10_000, 100_000, 1_000_000)
DESCRIPTION: Final = "Workers, Redis shards, GB and cores for N concurrent turns."


def load_inputs(path: Path) -> Inputs:
    return msgspec.json.decode(path.read_bytes(), type=Inputs)


def save_inputs(path: Path, inputs: Inputs) -> None:
    path.write_bytes(msgspec.json.format(msgspec.json.encode(inputs), indent=2) + b"\n")


def examples(args: argparse.Namespace, inputs: Inputs) -> tuple[list[Demand], list[Any]]:
    demands = [
        Demand(
            concurrent_turns=n,
            tokens_per_s_per_turn=args.turns_per_s,
            subscribers_per_session=args.subscribers,
            retain_s=args.retain_s,
        )
        for n in EXAMPLES
    ]
    return demands, [plan(d, inputs, Limits()) for d in demands]


async def measured_inputs(args: argparse.Namespace, log_dir: Path) -> tuple[Inputs, Any]:
    given = args.redis_url is not None
    with (
        redis_url(args.redis_url, log_dir / "redis") as url,
        contextlib.ExitStack() as stack,
    ):
        cluster = None
        if not args.no_cluster:
            node = stack.enter_context(redis_url(args.cluster_url, log_dir / "costs", True))
            cluster = Where(url=node, given=args.cluster_url is not None, cluster=True)
        return await measure(Where(url=url, given=given), cluster, args, log_dir)


async def cluster_check(args: argparse.Namespace, inputs: Inputs, log_dir: Path) -> list[Any]:
    runs = []
    play = Play(seconds=args.check_seconds, seed=args.seed, coalesce=not args.one_delta_per_token)
    for n in range(args.repeat):
        with redis_url(args.cluster_url, log_dir / f"cluster-{n}", cluster=True) as url:
            where = Where(url=url, given=args.cluster_url is not None, cluster=True)
            runs.append(await check.check_once(where, inputs, args.check_turns, play, log_dir))
    return runs


async def main_async(args: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if args.measure:
        inputs, out["measure_reports"] = await measured_inputs(args, log_dir)
        save_inputs(args.inputs, inputs)
    inputs = load_inputs(args.inputs)
    demands, plans = examples(args, inputs)
    out["inputs"] = msgspec.to_builtins(inputs)
    out["examples"] = [
        {"demand": msgspec.to_builtins(d), "plan": msgspec.to_builtins(p)}
        for d, p in zip(demands, plans, strict=True)
    ]
    if args.check_cluster:
        runs = await cluster_check(args, inputs, log_dir)
        out["cluster_check"] = {"runs": runs, "within_25pct": check.verdict(runs)}
    return out


def text(args: argparse.Namespace, out: dict[str, Any]) -> str:
    inputs = msgspec.convert(out["inputs"], Inputs)
    demands = [msgspec.convert(e["demand"], Demand) for e in out["examples"]]
    plans = [plan(d, inputs, Limits()) for d in demands]
    parts = [
        f"Inputs ({args.inputs}):",
        report.inputs_table(inputs),
        "",
        "Worked examples:",
        report.examples_table(demands, plans, Limits()),
    ]
    if "cluster_check" in out:
        verdict = out["cluster_check"]["within_25pct"]
        parts += ["", f"Cluster check (all within 25%: {verdict}):"]
        parts.append(report.check_table(out["cluster_check"]["runs"]))
        parts += ["", "The same runs against a prediction from the costs on one Redis:"]
        parts.append(report.check_table(out["cluster_check"]["runs"], "from_one_redis_costs"))
    return "\n".join(parts)


def _loads(value: str) -> tuple[int, ...]:
    return tuple(int(v) for v in value.split(","))


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.capacity", description=DESCRIPTION)
    add = parser.add_argument
    add("--json", action="store_true", help="print one JSON object")
    add("--inputs", type=Path, default=INPUTS, help="the inputs' JSON (read; --measure writes)")
    add("--turns-per-s", type=float, default=50.0, help="provider tokens/s of a turn in flight")
    add("--subscribers", type=float, default=1.0, help="SSE subscribers per session")
    add("--retain-s", type=float, default=600.0, help="retention window (TERMINUS_RETAIN_MS)")
    add("--measure", action="store_true", help="measure the inputs on this machine first")
    add("--loads", type=_loads, default=(25, 50, 100), help="turns in flight of each CPU run")
    add("--seconds", type=float, default=10.0, help="length of each realistic run")
    add("--fanout-seconds", type=float, default=8.0, help="length of the bench.fanout run")
    add("--gateway-us", type=float, default=None, help="take this, do not run bench.fanout")
    add("--check-cluster", action="store_true", help="check a prediction on a 3-shard cluster")
    add("--check-turns", type=int, default=60, help="turns in flight of the cluster run")
    add("--check-seconds", type=float, default=10.0, help="length of the cluster run")
    add("--repeat", type=int, default=2, help="cluster runs, each on a new cluster")
    add("--seed", type=int, default=1, help="seed of the realistic workload")
    add(
        "--one-delta-per-token",
        action="store_true",
        help="publish a delta per token, not one per network read as the default producer does",
    )
    add("--redis-url", default=None, help="use this Redis, not a private one")
    add("--cluster-url", default=None, help="use this cluster (a node), not a private one")
    add("--no-cluster", action="store_true", help="measure costs on one Redis only")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    raise_on_sigterm()
    try:
        with tempfile.TemporaryDirectory(prefix="terminus-capacity-") as tmp:
            out = asyncio.run(main_async(args, Path(tmp)))
    except KeyboardInterrupt:
        raise SystemExit("bench.capacity: interrupted; workers and Redis stopped") from None
    except (WorkerDied, TimeoutError, RuntimeError) as exc:
        raise SystemExit(f"bench.capacity: {exc}") from None
    if args.json:
        sys.stdout.write(msgspec.json.encode(out).decode() + "\n")
    else:
        print(text(args, out))


if __name__ == "__main__":
    main()
