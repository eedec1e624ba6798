"""SSE fan-out through the HTTP gateway against a raw Redis reader, in one run.

    python -m bench.fanout [--subscribers 1000] [--sessions 100] [--rate EVENTS_PER_S]
                           [--seconds 20] [--clients 2] [--deltas 100] [--redis-url URL] [--json]

One worker process (`python -m terminus worker`) and one gateway process (`python -m terminus
gateway`: uvicorn, one hub) run against a private redis-server (AOF everysec) unless
`--redis-url` names one. `--subscribers` SSE connections, spread evenly over `--sessions`
sessions (one token each), live in `--clients` client processes (`bench.fanout.client`); a raw
reader process (`bench.fanout.baseline`) XREADs the same session streams directly. This process
then publishes streaming turns (`bench.fanout.producer`) at `--rate` events/s for `--seconds`.

Measured, per text-delta frame published after the warm-up: end to end (publish -> SSE client),
baseline (publish -> raw reader: the worker and Redis) and added by the gateway (SSE client ->
the raw reader's receive of the same frame); delivered frames/s, and its ratio to the raw
reader's frames/s times the fan-out; CPU of every process. Every subscriber must have received
its session's frames exactly once and in order. The target (p99 added <= 50 ms) is reported,
not asserted. `--json` prints one object (`frames_per_s`, `p99_ms` = added p99, and the rest).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, NamedTuple

import msgspec
from redis.asyncio import Redis

from bench.common.children import Child, gateway, wait_healthy
from bench.common.output import emit
from bench.common.procs import WorkerConfig, WorkerDied, WorkerPool, raise_on_sigterm
from bench.common.procs import redis_url as private_redis
from bench.common.redis_ops import delete_prefix, outcome, wait_drained, wait_owned
from bench.fanout import report as rep
from bench.fanout import wire
from bench.fanout.producer import Paced, Turns, paced
from bench.fanout.setup import HOST, PARTITIONS, Setup, Usage, result_path
from terminus.service.sdk.producer import Producer

RATED_EVENTS_PER_S: Final = 1_500  # docs/fanout-method.md: the rate at which this fan-out holds
TARGET_P99_MS: Final = 50.0
WARMUP_S: Final = 2.0
START_TIMEOUT_S: Final = 90.0
WORKER_ENV: Final = {"TERMINUS_SESSION_MAXLEN": "10000000"}  # no frame trimmed before it is read
DESCRIPTION: Final = "SSE fan-out through the gateway, against a raw Redis reader."


async def run(
    setup: Setup, redis: Redis, pool: WorkerPool, children: list[Child]
) -> dict[str, Any]:
    """Start everything, publish for `--seconds`, wait for every frame, gather the figures."""
    gw = await start_service(setup, redis, pool, children)
    readers = await start_readers(setup, children)
    before = await Usage.read(redis, pool, gw, readers)
    args = setup.args
    producer = Producer(redis, partitions=PARTITIONS, prefix=setup.prefix)
    tails: dict[str, bytes] = {}
    sent = await paced(producer, Turns(setup.sessions, args.deltas), args.rate, args.seconds, tails)
    used = (await Usage.read(redis, pool, gw, readers)).since(before)

    def alive() -> None:
        pool.check_alive()
        gw.check_alive()

    await wait_drained(redis, tails, START_TIMEOUT_S + args.seconds, alive)
    counts = [int(await redis.xlen(s)) for s in setup.streams]
    results = await settle(setup, readers, counts)
    left = await outcome(redis, setup.sessions, PARTITIONS, setup.prefix)
    report = figures(setup, Run(results, counts, sent, used, sent.end - before.at))
    report["dead_letters"] = left.dead
    return report


async def start_readers(setup: Setup, children: list[Child]) -> list[Child]:
    """The raw reader and the client processes, once each follows its streams."""
    readers = setup.readers()
    for child in readers:
        children.append(await child.start(talk=True))
    await asyncio.gather(*(c.expect(wire.READY, START_TIMEOUT_S) for c in readers))
    return readers


async def settle(setup: Setup, readers: list[Child], counts: list[int]) -> list[wire.ReaderResult]:
    """Tell the readers how many frames each stream holds; their results once they have them."""
    expected = wire.Expected(counts=counts, timeout_s=setup.args.settle)
    for child in readers:
        child.tell(msgspec.json.encode(expected).decode())
    await asyncio.gather(*(c.expect(wire.DONE, setup.args.settle + 60) for c in readers))
    return [wire.read(result_path(setup.work, c.name), wire.ReaderResult) for c in readers]


async def start_service(
    setup: Setup, redis: Redis, pool: WorkerPool, children: list[Child]
) -> Child:
    """The gateway and the worker, once the worker owns every partition and the gateway answers."""
    gw = await gateway(setup.service_env(), HOST, setup.port, setup.work / "gateway.log").start()
    children.append(gw)
    pool.start()
    await wait_owned(redis, setup.prefix, PARTITIONS, START_TIMEOUT_S)
    await wait_healthy(HOST, setup.port, gw)
    return gw


class Run(NamedTuple):
    """What a run produced: the readers' results (the raw reader first), each session stream's
    length, the publishing times, CPU seconds per component and the seconds they cover."""

    results: list[wire.ReaderResult]
    counts: list[int]
    sent: Paced
    used: dict[str, float | None]
    seconds: float


def figures(setup: Setup, run: Run) -> dict[str, Any]:
    args = setup.args
    base, clients = run.results[0], run.results[1:]
    window = rep.Window(run.sent.start + WARMUP_S, run.sent.end)
    report = environment(setup)
    report["achieved_events_per_s"] = run.sent.events / (run.sent.end - run.sent.start)
    report.update(rep.rates(base, clients, window))
    fanout = args.subscribers / args.sessions
    raw = report["baseline_frames_per_s"] * fanout
    report["ratio_to_baseline"] = report["frames_per_s"] / raw if raw else None
    latencies = rep.Latencies()
    latencies.collect(base, clients, window)
    report.update(rep.latency_report(latencies))
    delivered = sum(len(r.cursors) for c in clients for r in c.received)
    report["frames_delivered"] = delivered
    report["frames_in_streams"] = sum(run.counts)
    during = sum(
        run.sent.start <= t <= run.sent.end for c in clients for r in c.received for t in r.times
    )
    report.update(rep.cpu_report(run.used, run.seconds, during))
    report.update(rep.checks(base, clients, run.counts))
    report["p99_target_met"] = report["p99_ms"] <= TARGET_P99_MS
    return report


def environment(setup: Setup) -> dict[str, Any]:
    args = setup.args
    return {
        "python": sys.version.split()[0],
        "cpu_count": os.cpu_count(),
        "redis": args.redis_url or "private redis-server, AOF everysec",
        "subscribers": args.subscribers,
        "sessions": args.sessions,
        "client_processes": args.clients,
        "rate_events_per_s": args.rate,
        "seconds": args.seconds,
        "deltas": args.deltas,
        "partitions": PARTITIONS,
        "warmup_s": WARMUP_S,
        "rated_events_per_s": RATED_EVENTS_PER_S,
        "target_p99_ms": TARGET_P99_MS,
    }


async def main_async(args: argparse.Namespace, url: str, work: Path) -> dict[str, Any]:
    setup = Setup(args, url, work)
    redis = Redis.from_url(url)
    config = WorkerConfig(url, setup.prefix, PARTITIONS, args.batch_size, work, WORKER_ENV)
    pool = WorkerPool(config, 1)
    children: list[Child] = []
    try:
        return await run(setup, redis, pool, children)
    finally:
        for child in reversed(children):
            await child.stop()
        pool.stop()
        if args.redis_url:  # a private Redis goes away with its data
            await delete_prefix(redis, setup.prefix)
        await redis.aclose()


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.fanout", description=DESCRIPTION)
    add = parser.add_argument
    add("--subscribers", type=int, default=1000, help="SSE connections")
    add("--sessions", type=int, default=100, help="sessions the subscribers spread over")
    add("--rate", type=float, default=RATED_EVENTS_PER_S, help="inbound events/s, all sessions")
    add("--seconds", type=float, default=20.0, help="how long the producer publishes")
    add("--clients", type=int, default=2, help="client processes holding the subscribers")
    add("--deltas", type=int, default=100, help="text deltas per turn")
    add("--batch-size", type=int, default=512, help="the worker's TERMINUS_BATCH_SIZE")
    add("--settle", type=float, default=30.0, help="seconds to wait for the last frames")
    add("--redis-url", default=None, help="use this Redis, not a private one")
    add("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.subscribers < args.sessions or args.seconds <= WARMUP_S:
        parser.error(f"need subscribers >= sessions and seconds > {WARMUP_S}")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    raise_on_sigterm()
    try:
        with tempfile.TemporaryDirectory(prefix="terminus-fanout-") as tmp:
            work = Path(tmp)
            with private_redis(args.redis_url, work / "redis") as url:
                report = asyncio.run(main_async(args, url, work))
    except KeyboardInterrupt:
        raise SystemExit("bench.fanout: interrupted; processes and Redis stopped") from None
    except (WorkerDied, TimeoutError) as exc:
        raise SystemExit(f"bench.fanout: {exc}") from None
    emit(report, args.json, rep.table)


if __name__ == "__main__":
    main()
