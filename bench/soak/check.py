"""The soak's checker: every session's frames read live, as a subscriber reads them, and compared
with the in-process fold of exactly what its producer published.

One reader XREADs the session streams of every session in play (cursor after cursor, so a Redis
restart or a cut connection loses nothing on the reading side). A session is judged once its
producer is done and the reader holds at least as many frames as the fold expects, plus a grace
period in which a late duplicate would still show. `compare` counts what differs: frames lost,
duplicated (more copies than expected), unexpected (not in the fold at all), and order inversions.
At the end, `late_extra` looks once more at every judged stream still in Redis, for frames
committed after its grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
from bisect import bisect_left
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Final, TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError

from bench.soak.log import LogReader, Position, raise_if_cancelled
from bench.soak.reads import read_streams
from bench.soak.series import Series
from terminus.events.codec import encode_event
from terminus.events.inbound import InboundEvent
from terminus.service.keys import FIELD, keys_for_session
from terminus.service.redis.replies import StreamReply
from terminus.service.settings import Settings
from tests.support.faults import expect

TURN_ENDS: Final = (b'{"sessionUpdate":"turn_finished"', b'{"sessionUpdate":"agent_error"')
READ_COUNT: Final = 1000
BLOCK_MS: Final = 100
SAMPLES: Final = 10  # sessions named in the report per kind of difference
H = TypeVar("H", bound=Hashable)
KINDS: Final = ("lost", "duplicated", "unexpected", "inversions")


@dataclass
class Diff:
    """How a session's frames differ from the fold's: all zero when they are the same."""

    lost: int = 0
    duplicated: int = 0
    unexpected: int = 0
    inversions: int = 0

    def __bool__(self) -> bool:
        return any((self.lost, self.duplicated, self.unexpected, self.inversions))


def compare(expected: Sequence[H], observed: Sequence[H]) -> Diff:
    """The k-th copy of a frame in `observed` matches the k-th copy in `expected` (frames of one
    part may be byte-identical); inversions are matched frames that came before their
    predecessor in the fold's order."""
    position: dict[tuple[H, int], int] = {}
    copies: Counter[H] = Counter()
    for index, frame in enumerate(expected):
        position[frame, copies[frame]] = index
        copies[frame] += 1
    seen: Counter[H] = Counter()
    matched: list[int] = []
    diff = Diff()
    for frame in observed:
        key = (frame, seen[frame])
        seen[frame] += 1
        if key in position:
            matched.append(position[key])
        elif frame in copies:
            diff.duplicated += 1
        else:
            diff.unexpected += 1
    diff.lost = len(expected) - len(matched)
    diff.inversions = sum(1 for a, b in pairwise(matched) if b < a)
    return diff


class Watch:
    """One session: the fold of what was published, when, and the frames read so far."""

    def __init__(self, session_id: str, settings: Settings) -> None:
        keys = keys_for_session(session_id, settings.partitions, settings.prefix)
        self.session_id, self.key, self.inbound = session_id, keys.session(session_id), keys.inbound
        self.fold = expect.SessionFold(settings.core())
        self.marks: list[int] = []  # frames the fold expected after each publish
        self.mark_times: list[float] = []
        self.observed: list[bytes] = []
        self.cursor = "0-0"
        self.closed = False
        self.complete_at: float | None = None
        self.dead_raw: dict[str, bytes] = {}  # entry id -> bytes of an event the core rejects
        self.sent: list[Position] = []
        self.last_entry = "0-0"

    def published(self, entries: Sequence[tuple[bytes, InboundEvent]], t: float) -> None:
        """Fold entries Redis acknowledged at `t`, in order."""
        for entry_id, event in entries:
            self.sent.append((event.turn_id, event.step, event.attempt, event.seq))
            self.last_entry = entry_id.decode()
            before = len(self.fold.expected.dead)
            self.fold.apply(entry_id.decode(), event)
            if len(self.fold.expected.dead) > before:
                self.dead_raw[entry_id.decode()] = encode_event(event)
        self.marks.append(len(self.fold.out.frames))
        self.mark_times.append(t)

    def observe(self, frame: bytes, t: float) -> float | None:
        """Record a frame read at `t`; returns its latency from the publish that caused it."""
        self.observed.append(frame)
        index = bisect_left(self.marks, len(self.observed))
        return t - self.mark_times[index] if index < len(self.marks) else None


@dataclass
class Totals:
    """Every judged session's differences added up, with a few sessions named per kind."""

    sessions: int = 0
    frames_expected: int = 0
    frames_observed: int = 0
    frames: Diff = field(default_factory=Diff)
    events_sent: int = 0
    events: Diff = field(default_factory=Diff)  # acknowledged events against the log
    log_repeats: int = 0  # copies a retried publish added to the log: ignored by the fold
    late_extra: int = 0
    samples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, watch: Watch, expected: int, frames: Diff, events: Diff, repeats: int) -> None:
        """Count one judged session."""
        self.sessions += 1
        self.frames_expected += expected
        self.frames_observed += len(watch.observed)
        self.events_sent += len(watch.sent)
        self.log_repeats += repeats
        self._add(watch.session_id, "frames", self.frames, frames)
        self._add(watch.session_id, "events", self.events, events)

    def _add(self, session_id: str, what: str, total: Diff, diff: Diff) -> None:
        for kind in KINDS:
            count = getattr(diff, kind)
            setattr(total, kind, getattr(total, kind) + count)
            names = self.samples.setdefault(f"{what}_{kind}", [])
            if count and len(names) < SAMPLES:
                names.append(session_id)

    def report(self) -> dict[str, Any]:
        """The totals as the JSON report shows them."""
        return {
            "sessions": self.sessions,
            "frames_expected": self.frames_expected,
            "frames_observed": self.frames_observed,
            **{kind: getattr(self.frames, kind) for kind in KINDS},
            "late_extra": self.late_extra,
            "events_published": self.events_sent,
            **{f"events_{kind}": getattr(self.events, kind) for kind in KINDS},
            "log_repeats": self.log_repeats,
            "samples": {kind: names for kind, names in self.samples.items() if names},
        }


class FrameReader:
    """Reads the frames of every watched session and judges each session when it is done."""

    def __init__(
        self, redis: Redis, settings: Settings, series: Series, log: LogReader, grace_s: float
    ) -> None:
        self.redis, self.settings, self.series, self.grace_s = redis, settings, series, grace_s
        self.log = log
        self.active: dict[str, Watch] = {}  # by session stream key
        self.judged: dict[str, int] = {}  # session stream key -> frames expected
        self.totals = Totals()
        self.dead: dict[tuple[str, str], tuple[str, bytes]] = {}  # source -> reason, raw
        self.read_errors = 0

    def watch(self, session_id: str) -> Watch:
        """Start following a session, before its first publish."""
        watch = Watch(session_id, self.settings)
        self.active[watch.key] = watch
        self.log.follow(session_id)
        return watch

    async def run(self, loop_time: Any) -> None:
        """Read until cancelled; a failed read is retried from the same cursors."""
        while True:
            if not self.active:
                await asyncio.sleep(BLOCK_MS / 1000)
                continue
            try:
                reply = await self._read()
            except (RedisError, OSError, TimeoutError):
                raise_if_cancelled()
                self.read_errors += 1
                await asyncio.sleep(0.1)
                continue
            now = loop_time()
            for key, entries in reply:
                watch = self.active[key.decode()]
                for entry_id, fields in entries:
                    self._observe(watch, entry_id, fields.get(FIELD, b""), now)
            self._judge_done(now)

    async def _read(self) -> StreamReply:
        streams = {key: watch.cursor for key, watch in self.active.items()}
        async with asyncio.timeout(BLOCK_MS / 1000 + 10):
            return await read_streams(self.redis, streams, READ_COUNT, BLOCK_MS)

    def _observe(self, watch: Watch, entry_id: bytes, frame: bytes, now: float) -> None:
        watch.cursor = entry_id.decode()
        latency = watch.observe(frame, now)
        self.series.add_frame(now, latency, frame.startswith(TURN_ENDS))

    def _judge_done(self, now: float) -> None:
        for watch in list(self.active.values()):
            if not watch.closed or len(watch.observed) < len(watch.fold.out.frames):
                continue
            if not self.log.caught_up(watch.inbound, watch.last_entry):
                continue
            if watch.complete_at is None:
                watch.complete_at = now
            elif now - watch.complete_at >= self.grace_s:
                self.judge(watch)

    def judge(self, watch: Watch) -> None:
        """Compare the session's frames with the fold's and forget them."""
        self.active.pop(watch.key, None)
        expected = watch.fold.result()
        diff = compare(expected.frames, watch.observed)
        logged = self.log.take(watch.session_id)
        first = list(dict.fromkeys(logged))
        events = compare(watch.sent, first)
        self.totals.add(watch, len(expected.frames), diff, events, len(logged) - len(first))
        self.judged[watch.key] = len(expected.frames)
        for entry_id, reason in expected.dead.items():
            self.dead[watch.inbound, entry_id] = (reason, watch.dead_raw[entry_id])

    def judge_all(self) -> None:
        """Judge the sessions still in play as they stand (what is missing is lost)."""
        for watch in list(self.active.values()):
            self.judge(watch)

    async def drained(self, timeout: float) -> bool:
        """Wait until every session is judged, for at most `timeout` seconds."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while self.active:
                    await asyncio.sleep(0.1)
        return not self.active

    async def count_late_extra(self) -> int:
        """Frames beyond the fold's count in the judged streams still in Redis."""
        items = list(self.judged.items())
        for start in range(0, len(items), 500):
            chunk = items[start : start + 500]
            async with self.redis.pipeline(transaction=False) as pipe:
                for key, _ in chunk:
                    pipe.xlen(key)
                lengths: list[int] = await pipe.execute()
            self.totals.late_extra += sum(
                max(0, n - expected) for (_, expected), n in zip(chunk, lengths, strict=True)
            )
        return self.totals.late_extra
