"""`bench.e2e --realistic`: what a provider token costs under N concurrent streamed turns
(bench/e2e/arrivals.py, bench/e2e/schedule.py), and the latency terminus adds to it.

The schedule is played twice, each turn by its own task that publishes each of its reads when
due: straight to the session streams (the raw loop, the floor), then through one worker with
`Producer.publish`, one call per read as a producer makes one per network read. Before the
worker's run, the prelude (what the turns under way at 0 published before it) is published and
drained, so the clock starts on a worker holding N open turns. A reader follows one session in
`WATCH_EVERY` and measures each delta's publish-to-frame latency (bench/e2e/latency.py).

Costs are divided by the provider tokens published after the clock: the worker's CPU until
every entry is acked, Redis's CPU while publishing and reading (the producer's XADDs and the
reader's XREADs included: the raw loop's Redis CPU is what they cost alone, `net` is what is
left), the frames the worker wrote and the entries published.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from time import perf_counter
from typing import Any, Final, NamedTuple

import msgspec
from redis.asyncio import Redis

from bench.common.percentiles import p99_by_second, percentiles
from bench.common.redis_ops import outcome, publish_all, wait_drained, wait_grouped, wait_owned
from bench.e2e import latency as lat
from bench.e2e.arrivals import Model, one_delta_per_read, one_delta_per_token
from bench.e2e.phases import FLOOR, START_TIMEOUT_S, WARMUP_S, WATCH_EVERY, WORKER, Meter, Run
from bench.e2e.schedule import Publish, Schedule, build
from terminus.events.inbound import InboundEvent
from terminus.service.keys import Keys
from terminus.service.redis.connect import connect
from terminus.service.redis.replies import xrevrange
from terminus.service.sdk.producer import Producer

DEFAULT_TURNS: Final = 100
DEFAULT_SECONDS: Final = 20.0
CONNECTIONS_PER_TURN: Final = 4  # turns in flight drift above their mean
CONNECTIONS_MIN: Final = 256
PRODUCERS: Final = {
    False: "one text-delta per provider token, one publish per network read",
    True: "one text-delta per network read (coalesce_reads), one publish per network read",
}


@contextlib.asynccontextmanager
async def publishing(run: Run) -> AsyncIterator[Redis]:
    """A client for the turns' publishes: a connection for each turn publishing at once, as an
    application serving that many requests holds (redis-py's default pool holds 100)."""
    size = max(CONNECTIONS_MIN, CONNECTIONS_PER_TURN * run.args.turns)
    redis = connect(run.url, cluster=run.args.cluster, max_connections=size)
    try:
        # Connected before the clock starts, or the first second measures connection set-up.
        await asyncio.gather(*(redis.ping() for _ in range(2 * run.args.turns)))
        yield redis
    finally:
        await redis.aclose()


class Player:
    """Plays a schedule through `publish`: each turn's publishes when due, in order, the turns
    side by side; notes each publish's send time in the probe and how late it went out."""

    def __init__(self, schedule: Schedule, publish: lat.Publish, probe: lat.Probe) -> None:
        self.schedule, self.publish, self.probe = schedule, publish, probe
        self.late_s: list[float] = []
        self.due_s: list[float] = []  # when each publish was due, seconds into the run

    async def __call__(self) -> float:
        self.probe.start = start = perf_counter()
        await asyncio.gather(*(self.turn(start, ps) for ps in self.schedule.turns if ps))
        return perf_counter() - start

    async def turn(self, start: float, publishes: Sequence[Publish]) -> None:
        events = self.schedule.events
        for p in publishes:
            delay = start + p.at_s - perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            now = perf_counter()
            self.late_s.append(now - start - p.at_s)
            self.due_s.append(p.at_s)
            self.probe.sent[p.first : p.first + p.size] = [now] * p.size
            await self.publish(events[p.first : p.first + p.size])


Then = Callable[[str, Schedule], Awaitable[None]]


async def realistic_phase(run: Run, then: Then | None = None) -> dict[str, Any]:
    """The raw loop, then one worker, on the same schedule; the report's `realistic_*` keys.
    `then` gets the worker's prefix and the schedule once the worker is stopped, before the
    keys are deleted (bench.capacity weighs them)."""
    args = run.args
    deltas_of = one_delta_per_read if args.coalesce_reads else one_delta_per_token
    schedule = build(Model(turns=args.turns, seconds=args.seconds), args.seed, deltas_of)
    watched = schedule.sessions[::WATCH_EVERY]
    base = await _baseline(run, schedule, watched)
    ours, worker_cpu, left = await _through_worker(run, schedule, watched, then)
    report = realistic_report(schedule, ours, base, worker_cpu, left)
    if args.floor:
        least, floor_cpu, _ = await _through_worker(run, schedule, watched, None, FLOOR)
        report.update(floor_report(schedule, least, base, floor_cpu))
    return report | {"realistic_producer": PRODUCERS[bool(args.coalesce_reads)]}


class Played(NamedTuple):
    """What the reader measured, and how late the player published."""

    measured: lat.Measured
    late_s: list[float]
    due_s: list[float]


async def _baseline(run: Run, schedule: Schedule, watched: list[str]) -> Played:
    """The schedule XADDed straight to the session streams the reader follows."""
    prefix, partitions = run.new_prefix("real-base"), run.args.partitions
    probe = lat.Probe(schedule.events, watched, WARMUP_S)
    streams = lat.session_streams(watched, partitions, prefix)
    async with publishing(run) as redis:
        player = Player(schedule, lat.direct(redis, partitions, prefix), probe)
        measured = await lat.measure_driven(run.redis, player, streams, probe)
    await run.drop_keys()
    return Played(measured, player.late_s, player.due_s)


async def _through_worker(
    run: Run, schedule: Schedule, watched: list[str], then: Then | None, module: str = WORKER
) -> tuple[Played, float | None, dict[str, int]]:
    """The schedule through one worker (or the floor consumer): its latencies, how late
    publishes went out, the worker's CPU seconds, and the frames, dead letters and open turns
    it left."""
    prefix, partitions = run.new_prefix("real"), run.args.partitions
    async with publishing(run) as client:
        producer = await Producer(client, partitions=partitions, prefix=prefix).ready()
        probe = lat.Probe(schedule.events, watched, WARMUP_S)
        player = Player(schedule, producer.publish, probe)
        streams = lat.session_streams(watched, partitions, prefix)
        measured, worker_cpu, left = await _played(run, player, streams, prefix, module)
    if then is not None:
        await then(prefix, schedule)
    await run.drop_keys()
    return Played(measured, player.late_s, player.due_s), worker_cpu, left


async def _played(
    run: Run, player: Player, streams: list[str], prefix: str, module: str
) -> tuple[lat.Measured, float | None, dict[str, int]]:
    """Once a worker owns `prefix` and has drained the prelude, `player` played while the
    reader follows `streams`."""
    redis, partitions, schedule = run.redis, run.args.partitions, player.schedule
    timeout_s = run.drain_timeout(len(schedule.prelude) + len(schedule.events))
    with run.pool(prefix, 1, module) as pool:
        ready = wait_owned if module == WORKER else wait_grouped
        await ready(redis, prefix, partitions, START_TIMEOUT_S)
        await _published(redis, schedule.prelude, partitions, prefix, timeout_s, pool.check_alive)
        before = await outcome(redis, schedule.sessions, partitions, prefix)
        await asyncio.sleep(0.5)  # let every partition owner reach its blocking read
        meter = await Meter(redis, pool).start()
        since = await server_now(redis)  # the prelude's frames are not the reader's to read
        measured = await lat.measure_driven(redis, player, streams, player.probe, since)
        tails = await inbound_tails(redis, prefix, partitions)
        await wait_drained(redis, tails, timeout_s, pool.check_alive)
        worker_cpu = (await meter.read()).worker_cpu_s
        after = await outcome(redis, schedule.sessions, partitions, prefix)
    left = {
        "frames": after.frames - before.frames,
        "dead_letters": after.dead,
        "open_turns": after.open_turns,
    }
    return measured, worker_cpu, left


async def _published(
    redis: Redis,
    events: Sequence[InboundEvent],
    partitions: int,
    prefix: str,
    timeout_s: float,
    check: Callable[[], None],
) -> None:
    """`events` published and every one acked by the worker."""
    tails = await publish_all(redis, events, partitions, prefix)
    await wait_drained(redis, tails, timeout_s, check)


async def server_now(redis: Redis) -> str:
    """An entry id older than any entry appended from now on: ids follow the server's clock."""
    seconds, micros = await redis.time()
    return f"{seconds * 1000 + micros // 1000 - 1}-0"


async def inbound_tails(redis: Redis, prefix: str, partitions: int) -> dict[str, bytes]:
    """The last entry id of every inbound log that has one."""
    tails: dict[str, bytes] = {}
    for p in range(partitions):
        stream = Keys(p, prefix).inbound
        last = await xrevrange(redis, stream, count=1)
        if last:
            tails[stream] = last[0][0]
    return tails


def realistic_report(
    schedule: Schedule,
    played: Played,
    raw: Played,
    worker_cpu: float | None,
    left: dict[str, int],
) -> dict[str, Any]:
    tokens, model, ours, base = schedule.tokens, schedule.model, played.measured, raw.measured
    redis, raw_redis = ours.server.cpu_s * 1e6 / tokens, base.server.cpu_s * 1e6 / tokens
    worker = None if worker_cpu is None else worker_cpu * 1e6 / tokens
    ours_ms, base_ms = percentiles(ours.latencies), percentiles(base.latencies)
    report: dict[str, Any] = {
        "realistic_model": msgspec.to_builtins(model),
        "realistic_turns": model.turns,
        "realistic_concurrent_turns": schedule.concurrency,
        "realistic_turns_started": schedule.started,
        "realistic_sessions": len(schedule.sessions),
        "realistic_seconds": ours.seconds,
        "realistic_tokens": tokens,
        "realistic_reads": schedule.reads,
        "realistic_entries": len(schedule.events),
        "realistic_prelude_entries": len(schedule.prelude),
        "realistic_tokens_per_s": tokens / ours.seconds,
        "realistic_tokens_per_read": tokens / schedule.reads,
        "realistic_entries_per_token": len(schedule.events) / tokens,
        "realistic_frames_per_token": left["frames"] / tokens,
        "realistic_worker_cpu_us_per_token": worker,
        "realistic_redis_cpu_us_per_token": redis,
        "realistic_raw_redis_cpu_us_per_token": raw_redis,
        "realistic_net_cpu_us_per_token": None if worker is None else worker + redis - raw_redis,
        "realistic_redis_script_us_per_token": ours.server.usec("evalsha", "eval") / tokens,
        "realistic_bench_cpu_us_per_token": ours.bench_cpu_s * 1e6 / tokens,
        "realistic_late_p99_ms": percentiles(played.late_s)["p99"],
        "realistic_raw_late_p99_ms": percentiles(raw.late_s)["p99"],
        "realistic_late_p99_by_second_ms": p99_by_second(played.late_s, played.due_s),
        "realistic_samples": len(ours.latencies),
        "realistic_warmup_s": WARMUP_S,
        "realistic_unseen": ours.unseen,
        "realistic_raw_unseen": base.unseen,
        "realistic_redis_forks": ours.server.forks,
    }
    report.update({f"realistic_{k}": v for k, v in left.items()})
    for name in ("p50", "p99", "p999", "max"):
        report[f"realistic_{name}_ms"] = ours_ms[name]
        report[f"realistic_raw_{name}_ms"] = base_ms[name]
        report[f"realistic_added_{name}_ms"] = ours_ms[name] - base_ms[name]
    return report


def floor_report(
    schedule: Schedule, played: Played, raw: Played, cpu_s: float | None
) -> dict[str, Any]:
    """The floor consumer's costs per provider token on the same schedule (bench/floor)."""
    tokens, base = schedule.tokens, raw.measured.server.cpu_s * 1e6 / schedule.tokens
    redis = played.measured.server.cpu_s * 1e6 / tokens
    process = None if cpu_s is None else cpu_s * 1e6 / tokens
    ms, base_ms = percentiles(played.measured.latencies), percentiles(raw.measured.latencies)
    return {
        "realistic_floor_cpu_us_per_token": process,
        "realistic_floor_redis_cpu_us_per_token": redis,
        "realistic_floor_net_cpu_us_per_token": None if process is None else process + redis - base,
        "realistic_floor_added_p99_ms": ms["p99"] - base_ms["p99"],
        "realistic_floor_unseen": played.measured.unseen,
    }
