"""End-to-end throughput and latency of terminus against the raw Redis ceiling, in one run.

    python -m bench.e2e [--events 150000] [--partitions 16] [--json] [--redis-url URL] [--cluster]
                        [--repeat 2] [--load 0.5] [--seconds 10] [--worker-env NAME=VALUE ...]
                        [--worker-python PATH]
                        [--rate EVENTS_PER_S] [--no-latency] [--no-by-rate] [--no-peer]
                        [--rates R1,R2,...] [--floor] [--traces] [--sink]
    python -m bench.e2e --realistic [--turns 100] [--seconds 20] [--seed 1] [--coalesce-reads]
                        [--floor] [--json]

(a) raw: the workload's entries XADDed (pipelined), then drained by XREADGROUP COUNT batch + XACK
    with no processing, one task per partition; (a) and (b) are best of `--repeat` runs;
(b) e2e: the same workload published with `Producer.publish` under a fresh prefix, then 1 (and,
    under another prefix, 2) `python -m terminus worker` processes started; the rate counts from
    the first entry a worker reads until every entry is acked (its frames are then visible), and
    from the spawn of the processes too (Python start-up and lease taking included);
(p) peer: the same drain through the peer (`python -m bench.peer`: a FastStream per-message
    stream subscriber folding through the same core), one process, one run;
(f) floor (`--floor`): at each rate of the by-rate table, the floor consumer too (`python -m
    bench.floor`: read, one frame per entry, ack, lingered as the pump is; nothing else), its
    process's CPU and Redis's CPU per event: what terminus cannot cost less than there;
(s) sink (`--sink`): another 1-worker drain, then `terminus sink --once` writes that log into
    a new SQLite file; its rows/s and their ratio to the drain's (bench/e2e/sinking.py);
(c) latency: a paced producer at half (`--load`) the 1-worker rate for `--seconds`, a reader
    XREADing the session streams; per delta frame, the time from publish to the reader seeing
    it, after a warm-up second. Baseline: the same paced XADD + XREAD with no worker between.
(t) with `--traces`, only this: the 1-worker drain of (b) without and with a `terminus traces`
    follower beside the worker, exporting every turn's spans over OTLP/HTTP to a receiver in this
    process that counts them and keeps nothing (bench.e2e.traced), alternating, `--repeat` each.
(r) with `--realistic`, only this: `--turns` concurrent turns streaming provider tokens in
    network reads, with time to first token, decode rates and bursts (bench.e2e.arrivals), for
    `--seconds`, straight to the session streams and through one worker: CPU per provider
    token, frames and entries per token, and the latency added (bench.e2e.realistic).

Redis is a private redis-server with AOF (appendfsync everysec, as in production) in a temporary
directory, unless `--redis-url` names one. Each phase's keys are deleted once it is measured.
Workers are killed, process group and all, on any exit. The targets are reported, not asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Final

from redis.utils import HIREDIS_AVAILABLE

from bench.common.output import emit
from bench.common.procs import WorkerDied, raise_on_sigterm, redis_url
from bench.e2e.by_rate import by_rate_phase
from bench.e2e.phases import PEER, Run, drain_phase, latency_phase, raw_phase
from bench.e2e.realistic import DEFAULT_SECONDS, DEFAULT_TURNS, realistic_phase
from bench.e2e.report import table
from bench.e2e.sinking import sink_phase
from bench.e2e.traced import traces_phase
from bench.e2e.workload import expected_frames, sized
from terminus.events.inbound import InboundEvent
from terminus.service.redis.connect import connect

TARGET_EVENTS_PER_S: Final = 50_000
TARGET_P99_MS: Final = 10.0
LATENCY_SECONDS: Final = 10.0
DESCRIPTION: Final = "End-to-end throughput and latency of terminus against raw Redis."


async def best_of(
    repeat: int, key: str, phase: Callable[[], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    """The report of the run of `phase` with the highest `key`, out of `repeat` runs."""
    reports = [await phase() for _ in range(repeat)]
    best = max(reports, key=lambda r: float(r[key]))
    best[f"{key}_runs"] = [r[key] for r in reports]
    return best


async def measure_all(run: Run) -> dict[str, Any]:
    args = run.args
    if args.realistic:
        return await machine(run) | await realistic_phase(run)
    events = sized(args.seed, args.events, args.deltas)
    report = await environment(run, events)
    if args.rate:
        report.update(await latency_phase(run, args.rate), latency_load=None)
        return report
    if args.traces:
        report.update(await traces_phase(run, events))
        return report
    report.update(await drains(run, events))
    if args.sink:
        report.update(await sink_phase(run, events))
    if not args.no_peer:
        report["terminus_over_peer_drain"] = (
            report["e2e_events_per_s_1w"] / report["e2e_events_per_s_peer"]
        )
    if args.no_latency:
        report.update(dict.fromkeys(("p50_ms", "p99_ms", "p999_ms", "baseline_p99_ms")))
    else:
        rate = report["e2e_events_per_s_1w"] * args.load
        report.update(await latency_phase(run, rate), latency_load=args.load)
    if not args.no_by_rate:
        report.update(await by_rate_phase(run, report))
    return verdicts(report)


async def drains(run: Run, events: Sequence[InboundEvent]) -> dict[str, Any]:
    """The raw loop, one and two workers and the peer, each rate also as a ratio of the raw."""
    args, report = run.args, {}
    report.update(await best_of(args.repeat, "raw_events_per_s", partial(raw_phase, run, events)))
    for w in (1, 2):
        drain = partial(drain_phase, run, events, w)
        report.update(await best_of(args.repeat, f"e2e_events_per_s_{w}w", drain))
    if not args.no_peer:
        drain = partial(drain_phase, run, events, 1, PEER)
        report.update(await best_of(1, "e2e_events_per_s_peer", drain))
    for suffix in ("1w", "2w", "peer"):
        if f"e2e_events_per_s_{suffix}" in report:
            rate = report[f"e2e_events_per_s_{suffix}"]
            report[f"ratio_{suffix}"] = rate / report["raw_events_per_s"]
    return report


async def machine(run: Run) -> dict[str, Any]:
    """What every report starts with: the interpreter, the machine, Redis and the settings."""
    info: dict[str, Any] = await run.redis.info("server")
    return {
        "python": sys.version.split()[0],
        "hiredis": HIREDIS_AVAILABLE,
        "cpu_count": os.cpu_count(),
        "redis_version": info.get("redis_version"),
        "redis": run.args.redis_url or _private(run.args.cluster),
        "cluster": run.args.cluster,
        "partitions": run.args.partitions,
        "batch_size": run.args.batch_size,
        "worker_env": run.args.worker_env,
        "worker_python": run.args.worker_python,
        "seed": run.args.seed,
    }


async def environment(run: Run, events: Sequence[InboundEvent]) -> dict[str, Any]:
    return await machine(run) | {
        "events": len(events),
        "expected_frames": expected_frames(events),
        "latency_producer": run.args.producer,
        "deltas": run.args.deltas,
        "repeat": run.args.repeat,
        "target_events_per_s_per_worker": TARGET_EVENTS_PER_S,
        "target_p99_ms": TARGET_P99_MS,
    }


def _private(cluster: bool) -> str:
    if cluster:
        return "private local cluster (3 primaries, 3 replicas), AOF everysec"
    return "private redis-server, AOF everysec"


def verdicts(report: dict[str, Any]) -> dict[str, Any]:
    report["throughput_target_met"] = report["e2e_events_per_s_1w"] >= TARGET_EVENTS_PER_S
    if report["p99_ms"] is not None:
        report["latency_target_met"] = report["p99_ms"] <= TARGET_P99_MS
    return report


async def main_async(args: argparse.Namespace, url: str, log_dir: Path) -> dict[str, Any]:
    redis = connect(url, cluster=args.cluster)
    run = Run(args, redis, url, log_dir)
    try:
        return await measure_all(run)
    finally:
        run.stop_all()
        if args.redis_url:  # a private Redis goes away with its data
            await run.drop_keys()
        await redis.aclose()


def _assignment(text: str) -> str:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return text


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e", description=DESCRIPTION)
    parser.add_argument("--events", type=int, default=150_000, help="events of the workload")
    parser.add_argument("--partitions", type=int, default=16, help="partitions P")
    parser.add_argument("--batch-size", type=int, default=512, help="TERMINUS_BATCH_SIZE")
    parser.add_argument("--deltas", type=int, default=100, help="mean text deltas per attempt")
    parser.add_argument(
        "--seconds",
        type=float,
        default=None,
        help=f"length of the latency run (default {LATENCY_SECONDS:.0f}), or of the realistic "
        f"one (default {DEFAULT_SECONDS:.0f})",
    )
    parser.add_argument(
        "--load", type=float, default=0.5, help="latency run's rate, share of the 1-worker rate"
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the workload generator")
    parser.add_argument(
        "--repeat", type=int, default=2, help="runs of each drain measurement; best kept"
    )
    parser.add_argument("--redis-url", default=None, help="use this Redis, not a private one")
    parser.add_argument(
        "--worker-env",
        action="append",
        default=[],
        type=_assignment,
        metavar="NAME=VALUE",
        help="extra environment of the workers, e.g. TERMINUS_BLOCK_MS=100 (repeatable)",
    )
    parser.add_argument(
        "--worker-python",
        default=None,
        metavar="PATH",
        help="the interpreter the workers run (default this one): another checkout's venv, for "
        "an A/B of the worker across commits in one sitting",
    )
    parser.add_argument(
        "--sink",
        action="store_true",
        help="after a 1-worker drain, time `terminus sink --once` into SQLite on the same log",
    )
    parser.add_argument("--no-latency", action="store_true", help="skip the latency run")
    parser.add_argument(
        "--no-by-rate", action="store_true", help="skip CPU and latency by rate (bench.e2e.by_rate)"
    )
    parser.add_argument(
        "--no-peer",
        action="store_true",
        help="skip the peer (bench/peer: a FastStream subscriber a user would write instead)",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="at each rate of the by-rate table, and after the worker with --realistic, the floor "
        "consumer too (bench/floor: the least any consumer of the contract does; its process's "
        "and Redis's CPU)",
    )
    parser.add_argument(
        "--rates",
        type=lambda text: tuple(float(r) for r in text.split(",")),
        default=None,
        help="rates for the by-rate table, comma-separated (default: 1k, 5k, 10k, 30k and "
        "20/30/40%% of the drain)",
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="on a Redis Cluster: a private local one (3+3 nodes), or --redis-url names a node",
    )
    parser.add_argument(
        "--rate", type=float, default=0.0, help="only the latency run, at this many events/s"
    )
    parser.add_argument(
        "--producer",
        choices=("packed", "sdk"),
        default="packed",
        help="latency run's producer: XADDs packed before the run (default), or Producer.publish",
    )
    parser.add_argument(
        "--traces",
        action="store_true",
        help="only the 1-worker drain without and with a `terminus traces` follower exporting "
        "spans (the `otel` extra), alternating; their ratio",
    )
    parser.add_argument(
        "--realistic",
        action="store_true",
        help="only the realistic workload: concurrent turns streaming provider tokens in "
        "network reads, raw loop and one worker; costs per provider token (bench.e2e.realistic)",
    )
    parser.add_argument(
        "--turns",
        type=int,
        default=DEFAULT_TURNS,
        help="turns in flight at once, on average, in the realistic workload",
    )
    parser.add_argument(
        "--coalesce-reads",
        action="store_true",
        help="in the realistic workload, publish each network read's tokens as one delta, as a "
        "producer with coalesce_reads does",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.seconds is None:
        args.seconds = DEFAULT_SECONDS if args.realistic else LATENCY_SECONDS
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    raise_on_sigterm()
    try:
        with tempfile.TemporaryDirectory(prefix="terminus-e2e-") as tmp:
            log_dir = Path(tmp)
            with redis_url(args.redis_url, log_dir / "redis", args.cluster) as url:
                report = asyncio.run(main_async(args, url, log_dir))
    except KeyboardInterrupt:
        raise SystemExit("bench.e2e: interrupted; workers and Redis stopped") from None
    except (WorkerDied, TimeoutError) as exc:
        raise SystemExit(f"bench.e2e: {exc}") from None
    emit(report, args.json, table)


if __name__ == "__main__":
    main()
