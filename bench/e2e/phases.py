"""The phases of the end-to-end benchmark (see `bench.e2e`), each measured on its own prefix.

A `Run` hands out key prefixes and worker pools; every pool it started is stopped by
`stop_all`, and every prefix's keys are deleted by `drop_keys` once its phase is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from time import perf_counter
from typing import Any, Final, NamedTuple

from redis.asyncio import Redis

from bench.common.percentiles import p99_by_second, percentiles
from bench.common.procs import WorkerConfig, WorkerPool, machine_busy_s
from bench.common.redis_ops import (
    Outcome,
    ServerUsage,
    compact_aof,
    delete_prefix,
    outcome,
    park_groups,
    publish_all,
    rewind_groups,
    routed,
    server_usage,
    wait_drained,
    wait_grouped,
    wait_marked,
    wait_owned,
    wait_split,
    wait_started,
)
from bench.e2e import latency as lat
from bench.e2e.packed import PackedPublisher, to_inbound, to_session
from bench.e2e.raw import measure_raw
from bench.e2e.workload import marked, sized
from terminus.events.inbound import InboundEvent
from terminus.service.keys import partition_of
from terminus.service.sdk.producer import Producer

START_TIMEOUT_S: Final = 30.0
WORKER: Final = "terminus worker"
TRACES: Final = "terminus traces"  # the follower that exports every turn's spans
PEER: Final = "bench.peer"  # what a user would write instead (bench/peer/app.py)
FLOOR: Final = "bench.floor"  # the least any consumer of the contract does (bench/floor)
LATENCY_SESSIONS: Final = 64
WATCH_EVERY: Final = 4  # the reader follows one session in four
WARMUP_S: Final = 1.0


class Run:
    """One benchmark run: its Redis, key prefixes, settings, and the worker pools it started."""

    def __init__(self, args: argparse.Namespace, redis: Redis, url: str, log_dir: Path) -> None:
        self.args, self.redis, self.url, self.log_dir = args, redis, url, log_dir
        self.prefix = f"bench-{uuid.uuid4().hex[:8]}"
        self.prefixes: list[str] = []
        self.pools: list[WorkerPool] = []

    def new_prefix(self, name: str) -> str:
        self.prefixes.append(f"{self.prefix}-{name}")
        return self.prefixes[-1]

    async def drop_keys(self) -> None:
        """Delete the keys of every prefix so far, and on our private Redis compact the AOF:
        each phase starts on an empty Redis, with no rewrite of earlier data pending."""
        for prefix in self.prefixes:
            await delete_prefix(self.redis, prefix)
        self.prefixes.clear()
        if self.args.redis_url is None:
            await compact_aof(self.redis)

    def pool(
        self, prefix: str, size: int, module: str = WORKER, extra: dict[str, str] | None = None
    ) -> WorkerPool:
        """A pool on `prefix` of `size` processes running `python -m <module>` (with `extra` in
        their environment), remembered so that `stop_all` reaps it whatever happens."""
        args = self.args
        env = dict(item.split("=", 1) for item in args.worker_env) | (extra or {})
        if args.cluster:
            env["TERMINUS_REDIS_CLUSTER"] = "1"
        python = args.worker_python if module == WORKER else None
        config = WorkerConfig(
            self.url, prefix, args.partitions, args.batch_size, self.log_dir, env, module, python
        )
        self.pools.append(WorkerPool(config, size))
        return self.pools[-1]

    def stop_all(self) -> None:
        for pool in self.pools:
            pool.stop()

    def drain_timeout(self, events: int) -> float:
        return max(120.0, events / 1000)


async def raw_phase(run: Run, events: Sequence[InboundEvent]) -> dict[str, Any]:
    entries = routed(events, run.args.partitions, run.new_prefix("raw"))
    figures = await measure_raw(run.redis, entries, run.args.batch_size)
    await run.drop_keys()
    return figures.report()


async def drain_phase(
    run: Run,
    events: Sequence[InboundEvent],
    workers: int,
    module: str = WORKER,
    traces: str | None = None,
    then: Callable[[str], Awaitable[None]] | None = None,
) -> dict[str, Any]:
    """Pre-fill the inbound logs, start `workers` processes, time until every entry is acked.
    Its keys end in `_<workers>w`, or `_peer` for the peer's process. With `traces` (an OTLP/HTTP
    endpoint), a `terminus traces` follower exporting there runs beside the workers, started
    with them, and its keys end in `_traces`.

    Several workers start behind a start gun: processes that start together on a full log race,
    and the first to take its partitions drains alone (some of the others' too) until the rest
    take theirs, so a rate from the first read measured the race as much as the pool. So the
    log is pre-filled but for the last entry of each partition, with the group at its end; once
    the pool has split the partitions, the groups go back to the start and the held-back entries
    wake the owners. Not on a cluster (the leases span slots). `then` gets the prefix once the
    pool is stopped, before its keys are deleted (the sink phase reads the log)."""
    name = "traces" if traces else f"{workers}w" if module == WORKER else "peer"
    prefix, n, redis = run.new_prefix(f"{name}-{uuid.uuid4().hex[:4]}"), len(events), run.redis
    partitions = run.args.partitions
    gun = workers > 1 and module == WORKER and not run.args.cluster
    filled, held = held_back(events, partitions) if gun else (list(events), [])
    start = perf_counter()
    tails = await publish_all(redis, filled, partitions, prefix)
    publish_s = perf_counter() - start
    if gun:
        await park_groups(redis, sorted(tails))
    with run.pool(prefix, workers, module) as pool, beside(run, prefix, traces) as follower:
        spawned = perf_counter()
        if gun:
            await asyncio.wait_for(wait_split(redis, prefix, partitions, workers), START_TIMEOUT_S)
            await rewind_groups(redis, sorted(tails))
            tails.update(await publish_all(redis, held, partitions, prefix))
        first = await wait_started(redis, sorted(tails), START_TIMEOUT_S, pool.check_alive)
        meter = await Meter(redis, pool).start()
        done = await wait_drained(redis, tails, run.drain_timeout(n), pool.check_alive)
        used = await meter.read()
        timeout_s = run.drain_timeout(n)
        exported = await follower.exported(tails, done, timeout_s) if follower else {}
    left = await outcome(redis, (e.session_id for e in events), partitions, prefix)
    if then is not None:
        await then(prefix)
    await run.drop_keys()
    times = DrainTimes(publish_s, spawned, first, done)
    report = drain_report(f"_{name}", n, times, used, left)
    report[f"machine_busy_cores_{name}"] = _per_second(used.machine_s, done - first)
    report[f"start_gun_{name}"] = gun
    return report | exported


class Follower:
    """A `terminus traces` follower on a phase's prefix, exporting to an OTLP/HTTP endpoint."""

    def __init__(self, run: Run, prefix: str, endpoint: str) -> None:
        self.redis, self.prefix, self.partitions = run.redis, prefix, run.args.partitions
        self.pool = run.pool(prefix, 1, TRACES, {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint})

    async def exported(
        self, tails: dict[str, bytes], drained: float, timeout_s: float
    ) -> dict[str, Any]:
        """Once the follower has exported every turn up to `tails`: how long after the drain
        (`drained`, a perf_counter) that was, and the CPU the follower used in all, start-up
        included."""
        check = self.pool.check_alive
        done = await wait_marked(self.redis, self.prefix, self.partitions, tails, timeout_s, check)
        cpu = self.pool.cpu_seconds()
        return {"traces_lag_s": done - drained, "traces_follower_cpu_s": cpu and sum(cpu)}


@contextlib.contextmanager
def beside(run: Run, prefix: str, endpoint: str | None) -> Iterator[Follower | None]:
    """With `endpoint`, a follower on `prefix` until the block ends, stopped with it; else none."""
    if endpoint is None:
        yield None
        return
    follower = Follower(run, prefix, endpoint)
    with follower.pool:
        yield follower


def held_back(
    events: Sequence[InboundEvent], partitions: int
) -> tuple[list[InboundEvent], list[InboundEvent]]:
    """The events but the last of each partition, and those last ones (each after every other
    event of its partition, so of its session too)."""
    last = {partition_of(e.session_id, partitions): n for n, e in enumerate(events)}
    kept = set(last.values())
    return [e for n, e in enumerate(events) if n not in kept], [events[n] for n in sorted(kept)]


class Used(NamedTuple):
    """What was used between two readings: CPU seconds of each worker, Redis's usage, and
    CPU seconds of the whole machine (None where /proc cannot tell)."""

    workers: list[float] | None
    server: ServerUsage
    machine_s: float | None

    @property
    def worker_cpu_s(self) -> float | None:
        return None if self.workers is None else sum(self.workers)


class Meter:
    """Reads the CPU of a pool's workers, Redis and the machine at `start` and at `read`."""

    def __init__(self, redis: Redis, pool: WorkerPool) -> None:
        self.redis, self.pool = redis, pool

    async def start(self) -> Meter:
        self.workers, self.machine_s = self.pool.cpu_seconds(), machine_busy_s()
        self.server = await server_usage(self.redis)
        return self

    async def read(self) -> Used:
        server = (await server_usage(self.redis)).minus(self.server)
        workers = _each_minus(self.pool.cpu_seconds(), self.workers)
        return Used(workers, server, _minus(machine_busy_s(), self.machine_s))


class DrainTimes(NamedTuple):
    """Seconds the pre-fill took; perf_counter at spawn, first read and last ack."""

    publish_s: float
    spawned: float
    first: float
    done: float


def drain_report(suffix: str, n: int, t: DrainTimes, used: Used, left: Outcome) -> dict[str, Any]:
    usage, workers = used.server, used.workers
    return {
        f"producer_events_per_s{suffix}": n / t.publish_s,
        f"e2e_events_per_s{suffix}": n / (t.done - t.first),
        f"e2e_events_per_s_from_spawn{suffix}": n / (t.done - t.spawned),
        f"startup_s{suffix}": t.first - t.spawned,
        f"drain_s{suffix}": t.done - t.first,
        f"worker_cpu_us_per_event{suffix}": _per_event_us(used.worker_cpu_s, n),
        f"worker_cpu_share{suffix}": workers and [c / (sum(workers) or 1) for c in workers],
        f"redis_cpu_us_per_event{suffix}": usage.cpu_s * 1e6 / n,
        f"redis_script_us_per_event{suffix}": usage.usec("evalsha", "eval") / n,
        f"mean_batch{suffix}": mean_batch(n, usage),
        f"redis_forks{suffix}": usage.forks,
        f"frames{suffix}": left.frames,
        f"dead_letters{suffix}": left.dead,
        f"open_turns{suffix}": left.open_turns,
    }


async def latency_phase(
    run: Run, rate: float, peer: bool = False, floor: bool = False
) -> dict[str, Any]:
    """Paced publishing at `rate`: the baseline (no worker), then through one worker; with
    `peer`, through the peer's process too (its figures under `peer_*` keys); with `floor`,
    through the floor consumer (under `floor_*` keys, its Redis's CPU too)."""
    args = run.args
    events = marked(sized(args.seed + 1, int(rate * args.seconds), args.deltas), LATENCY_SESSIONS)
    watched = lat.watched_sessions(events, WATCH_EVERY)
    base = await _baseline(run, events, watched, rate)
    ours, worker_cpu = await _through_worker(run, events, watched, rate)
    report = latency_report(len(events), rate, ours, base)
    if peer:
        theirs, peer_cpu = await _through_worker(run, events, watched, rate, PEER)
        report.update({f"peer_{k}_ms": v for k, v in percentiles(theirs.latencies).items()})
        report["peer_unseen"] = theirs.unseen
        report["peer_cpu_us_per_event"] = _per_event_us(peer_cpu, len(events))
    if floor:
        least, floor_cpu = await _through_worker(run, events, watched, rate, FLOOR)
        report.update({f"floor_{k}_ms": v for k, v in percentiles(least.latencies).items()})
        report["floor_unseen"] = least.unseen
        report["floor_cpu_us_per_event"] = _per_event_us(floor_cpu, len(events))
        report["floor_redis_cpu_us_per_event"] = least.server.cpu_s * 1e6 / len(events)
    n = len(events)
    report["latency_worker_cpu_us_per_event"] = _per_event_us(worker_cpu, n)
    busy = ours.bench_cpu_s + ours.server.cpu_s + (worker_cpu or 0)
    report["latency_cpu_cores"] = busy / ours.seconds
    report["latency_machine_busy_cores"] = _per_second(ours.machine_s, ours.seconds)
    report["latency_mean_batch"] = mean_batch(n, ours.server)
    report["latency_redis_forks"] = ours.server.forks
    report["latency_calls_per_event"] = {
        name: round(calls / n, 3) for name, (calls, _) in sorted(ours.server.commands.items())
    }
    # Where Redis's time goes, by command (a script's commands count under their own names too).
    report["latency_redis_usec_per_event"] = {
        name: round(usec / n, 2) for name, (_, usec) in sorted(ours.server.commands.items())
    }
    return report


async def _baseline(
    run: Run, events: Sequence[InboundEvent], watched: list[str], rate: float
) -> lat.Measured:
    """The events XADDed straight to the session streams the reader follows."""
    prefix, partitions = run.new_prefix("base"), run.args.partitions
    streams = lat.session_streams(watched, partitions, prefix)
    probe = lat.Probe(events, watched, WARMUP_S)
    if run.args.producer == "sdk":
        publish = lat.direct(run.redis, partitions, prefix)
        measured = await lat.measure(run.redis, publish, streams, probe, rate)
    else:
        async with PackedPublisher(run.url, events, to_session(partitions, prefix)) as packed:
            measured = await lat.measure(run.redis, packed, streams, probe, rate)
    await run.drop_keys()
    return measured


async def _through_worker(
    run: Run, events: Sequence[InboundEvent], watched: list[str], rate: float, module: str = WORKER
) -> tuple[lat.Measured, float | None]:
    """The events published to the inbound logs of an idle worker (or the peer's process);
    and its CPU seconds."""
    prefix, partitions = run.new_prefix("lat"), run.args.partitions
    streams = lat.session_streams(watched, partitions, prefix)
    probe = lat.Probe(events, watched, WARMUP_S)
    packed = PackedPublisher(run.url, events, to_inbound(partitions, prefix))
    with run.pool(prefix, 1, module) as pool:
        if module == WORKER:
            await wait_owned(run.redis, prefix, partitions, START_TIMEOUT_S)
        else:
            await wait_grouped(run.redis, prefix, partitions, START_TIMEOUT_S)
        await asyncio.sleep(0.5)  # let every partition owner reach its blocking read
        meter = await Meter(run.redis, pool).start()
        if run.args.producer == "sdk":
            producer = Producer(run.redis, partitions=partitions, prefix=prefix)
            measured = await lat.measure(run.redis, producer.publish, streams, probe, rate)
        else:
            async with packed:
                measured = await lat.measure(run.redis, packed, streams, probe, rate)
        worker_cpu = (await meter.read()).worker_cpu_s
        pool.check_alive()
    await run.drop_keys()
    return measured, worker_cpu


def latency_report(
    events: int, rate: float, ours: lat.Measured, base: lat.Measured
) -> dict[str, Any]:
    report: dict[str, Any] = {
        "latency_rate_events_per_s": rate,
        "latency_achieved_events_per_s": events / ours.seconds,
        "latency_events": events,
        "latency_seconds": ours.seconds,
        "latency_samples": len(ours.latencies),
        "latency_unseen": ours.unseen,
        "baseline_unseen": base.unseen,
        "warmup_s": WARMUP_S,
        "latency_bench_cpu_us_per_event": ours.bench_cpu_s * 1e6 / events,
        "latency_redis_cpu_us_per_event": ours.server.cpu_s * 1e6 / events,
        "baseline_redis_cpu_us_per_event": base.server.cpu_s * 1e6 / events,
        "baseline_bench_cpu_us_per_event": base.bench_cpu_s * 1e6 / events,
    }
    ours_ms, base_ms = percentiles(ours.latencies), percentiles(base.latencies)
    report.update({f"{k}_ms": v for k, v in ours_ms.items()})
    report.update({f"baseline_{k}_ms": v for k, v in base_ms.items()})
    report["added_p99_ms"] = ours_ms["p99"] - base_ms["p99"]
    report["p99_by_second_ms"] = p99_by_second(ours.latencies, ours.offsets)
    return report


def mean_batch(events: int, usage: ServerUsage) -> float | None:
    """Entries per commit: each commit runs one XACK (scripts' commands are counted too)."""
    commits = usage.commands.get("xack", (0, 0))[0]
    return events / commits if commits else None


def _each_minus(after: list[float] | None, before: list[float] | None) -> list[float] | None:
    """CPU seconds of each worker between two readings."""
    if after is None or before is None:
        return None
    return [a - b for a, b in zip(after, before, strict=True)]


def _minus(after: float | None, before: float | None) -> float | None:
    return None if after is None or before is None else after - before


def _per_second(seconds: float | None, elapsed: float) -> float | None:
    return None if seconds is None else seconds / elapsed


def _per_event_us(seconds: float | None, events: int) -> float | None:
    return None if seconds is None else seconds * 1e6 / events
