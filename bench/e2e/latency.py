"""Publish-to-visible latency under a paced load, measured from one process.

A producer task publishes marked events (`bench.e2e.workload.marked`) at a fixed rate, in the
bursts that are due every millisecond, noting the perf_counter time of each publish call; a
reader task XREADs (BLOCK) a sample of the session streams, as frontends each read their own
session, and, for each marker in what arrives, records now minus that time. Through terminus
the producer appends to the inbound logs and the reader reads the frames the worker commits;
for the baseline the producer appends the same events straight to the streams the reader
reads, so no worker is in between.
"""

from __future__ import annotations

import asyncio
import resource
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from time import perf_counter
from typing import Any, Final, NamedTuple, cast

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from bench.common.procs import machine_busy_s
from bench.common.redis_ops import ServerUsage, server_usage
from bench.e2e.workload import markers
from terminus.events.codec import encode_event
from terminus.events.inbound import InboundEvent, ReasoningDelta, TextDelta
from terminus.service.keys import FIELD, keys_for_session
from terminus.service.redis.connect import is_cluster
from terminus.service.redis.replies import xread

TICK_S: Final = 0.001
READ_BLOCK_MS: Final = 100
READ_COUNT: Final = 10_000
SETTLE_S: Final = 10.0

Publish = Callable[[Sequence[InboundEvent]], Awaitable[Any]]


class Probe:
    """Send times by event index, and the latencies (seconds) of the markers seen so far: those
    of the deltas of the `watched` sessions (a sample keeps the reader's own load small)."""

    def __init__(
        self, events: Sequence[InboundEvent], watched: Collection[str], warmup_s: float
    ) -> None:
        self.events = events
        self.sent = [0.0] * len(events)
        self.pending = {
            n
            for n, e in enumerate(events)
            if isinstance(e, TextDelta | ReasoningDelta) and e.session_id in watched
        }
        self.latencies: list[float] = []
        self.offsets: list[float] = []  # seconds into the run each measured event was sent
        self.warmup_s = warmup_s
        self.start = 0.0

    def seen(self, raw: bytes, now: float) -> None:
        for n in markers(raw):
            if n in self.pending:
                self.pending.discard(n)
                if self.sent[n] >= self.start + self.warmup_s:
                    self.latencies.append(now - self.sent[n])
                    self.offsets.append(self.sent[n] - self.start)


async def paced(publish: Publish, probe: Probe, rate: float) -> float:
    """Publish every event at `rate` events/s; returns the seconds it took."""
    events, sent = probe.events, 0
    probe.start = start = perf_counter()
    while sent < len(events):
        due = min(len(events), int((perf_counter() - start) * rate) + 1)
        if due > sent:
            now = perf_counter()
            probe.sent[sent:due] = [now] * (due - sent)
            await publish(events[sent:due])
            sent = due
        await asyncio.sleep(TICK_S)
    return perf_counter() - start


async def read(
    redis: Redis, streams: Sequence[str], probe: Probe, stop: asyncio.Event, since: str = "0-0"
) -> None:
    """XREAD the streams after entry id `since` (from their start by default) until every
    marker is seen or `stop` is set."""
    cursors = dict.fromkeys(streams, since)
    while probe.pending and not stop.is_set():
        reply = await xread(redis, cursors, READ_COUNT, READ_BLOCK_MS)
        now = perf_counter()
        for stream, entries in reply:
            cursors[stream.decode()] = entries[-1][0].decode()
            for _, fields in entries:
                probe.seen(fields.get(FIELD, b""), now)


async def read_all(
    redis: Redis, streams: Sequence[str], probe: Probe, stop: asyncio.Event, since: str = "0-0"
) -> None:
    """`read` over all streams at once; on a cluster, one `read` per slot (XREAD names keys of
    one slot only), run side by side."""
    if not is_cluster(redis):
        return await read(redis, streams, probe, stop, since)
    slots: dict[int, list[str]] = {}
    for stream in streams:
        slots.setdefault(cast(RedisCluster, redis).keyslot(stream), []).append(stream)
    await asyncio.gather(*(read(redis, group, probe, stop, since) for group in slots.values()))
    return None


class Measured(NamedTuple):
    """Latencies (seconds), how long publishing took, markers never seen, the CPU seconds this
    process used and what Redis did meanwhile."""

    latencies: list[float]
    offsets: list[float]
    seconds: float
    unseen: int
    bench_cpu_s: float
    server: ServerUsage
    machine_s: float | None  # CPU seconds of every process on the machine, ours included


async def measure(
    redis: Redis, publish: Publish, streams: Sequence[str], probe: Probe, rate: float
) -> Measured:
    """Run producer and reader together until the reader saw every marker (or gave up)."""
    return await measure_driven(redis, lambda: paced(publish, probe, rate), streams, probe)


async def measure_driven(
    redis: Redis,
    drive: Callable[[], Awaitable[float]],
    streams: Sequence[str],
    probe: Probe,
    since: str = "0-0",
) -> Measured:
    """`measure` with any producer: `drive` publishes the probe's events, noting their send
    times and `probe.start`, and returns the seconds it took. The reader starts after entry
    id `since`."""
    stop = asyncio.Event()
    cpu, usage, machine = _cpu_s(), await server_usage(redis), machine_busy_s()
    reader = asyncio.create_task(read_all(redis, streams, probe, stop, since))
    try:
        seconds = await drive()
        await asyncio.wait_for(asyncio.shield(reader), SETTLE_S)
    except TimeoutError:
        pass
    finally:
        stop.set()
        await reader
    server = (await server_usage(redis)).minus(usage)
    bench_cpu, busy = _cpu_s() - cpu, machine_busy_s()
    machine_s = None if busy is None or machine is None else busy - machine
    return Measured(
        probe.latencies, probe.offsets, seconds, len(probe.pending), bench_cpu, server, machine_s
    )


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def watched_sessions(events: Sequence[InboundEvent], every: int) -> list[str]:
    """Every `every`-th session of `events`: the sample the reader follows."""
    return sorted({e.session_id for e in events})[::every]


def session_streams(sessions: Iterable[str], partitions: int, prefix: str) -> list[str]:
    return [keys_for_session(s, partitions, prefix).session(s) for s in sessions]


def direct(redis: Redis, partitions: int, prefix: str) -> Publish:
    """The baseline's producer: each event XADDed straight to its session stream, pipelined."""

    async def publish(events: Sequence[InboundEvent]) -> None:
        async with redis.pipeline(transaction=False) as pipe:
            for event in events:
                keys = keys_for_session(event.session_id, partitions, prefix)
                pipe.xadd(keys.session(event.session_id), {FIELD: encode_event(event)})
            await pipe.execute()

    return publish
