"""Harness of the fault tests: worker processes, their batches in hand, quiescence.

Workers run as `python -m terminus worker` OS processes, each in its own process group (its own
session), logging to a file; `Workers` SIGKILLs every one it started when its block ends,
whatever happened. Tests wait by polling against deadlines, never by sleeping a fixed time.
The load comes from `load.py`, the expected outcome and its checks from `expect.py`.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final, Self, cast

import msgspec
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from terminus.service.fold.releases import TOMBSTONE
from terminus.service.keys import GROUP, Keys, partition_of, workers_key
from terminus.service.redis.embedded import EmbeddedRedis
from terminus.service.redis.replies import StreamEntry
from terminus.service.settings import Settings
from terminus.statemachines.states import FINAL_STATES
from terminus.statemachines.turn import Turn
from tests.support.backends import mget_any
from tests.support.polling import until

REPO: Final = Path(__file__).resolve().parents[3]
WORKER: Final = (sys.executable, "-m", "terminus", "worker")
_TURN: Final = msgspec.msgpack.Decoder(Turn)
Source = tuple[str, str]  # an inbound entry: its stream and id (ids are unique per stream only)
StartRedis = Callable[..., EmbeddedRedis]  # the `private_redis` fixture of tests/conftest.py


def fault_settings(url: str, *, partitions: int = 8, **overrides: Any) -> Settings:
    """Short leases and block times; stalls far away, so only published events are folded."""
    values: dict[str, Any] = {
        "redis_url": url,
        "prefix": "fx",
        "partitions": partitions,
        "batch_size": 200,
        "block_ms": 200,
        "lease_ttl_ms": 1500,
        "stall_timeout_ms": 600_000,
    }
    return Settings(**(values | overrides))


def worker_env(settings: Settings) -> dict[str, str]:
    """The environment of a worker process running with `settings`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TERMINUS_")}
    env["REDIS_URL"] = settings.redis_url.reveal() if settings.redis_url else ""
    env["TERMINUS_PREFIX"] = settings.prefix
    for name in ("partitions", "batch_size", "block_ms", "lease_ttl_ms", "stall_timeout_ms"):
        env[f"TERMINUS_{name.upper()}"] = str(getattr(settings, name))
    env["TERMINUS_MAX_DELIVERIES"] = str(settings.max_deliveries)
    env["TERMINUS_REDIS_CLUSTER"] = "1" if settings.redis_cluster else "0"
    return env


class Workers:
    """Worker processes started by a test; every one still running is SIGKILLed on exit."""

    def __init__(self, settings: Settings, log_dir: Path, command: Sequence[str] = WORKER) -> None:
        self.env = worker_env(settings)
        self.log_dir = log_dir
        self.command = list(command)
        self.processes: list[subprocess.Popen[bytes]] = []
        self.killed: set[int] = set()
        self._logs: list[IO[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        log = (self.log_dir / f"worker-{len(self.processes)}.log").open("wb")
        self._logs.append(log)
        process = subprocess.Popen(
            self.command,
            env=self.env,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.processes.append(process)
        return process

    def signal(self, process: subprocess.Popen[bytes], signum: signal.Signals) -> None:
        """Send `signum` to the worker's whole process group."""
        os.killpg(process.pid, signum)

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        """SIGKILL, as a crash would, and reap it."""
        self.killed.add(process.pid)
        self.signal(process, signal.SIGKILL)
        process.wait(10)

    def running(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.processes if p.poll() is None]

    def crashed(self) -> list[str]:
        """Workers that exited without being killed by the test, with their log's tail."""
        return [
            f"pid {p.pid} exited {p.returncode}: {self.log(p)[-2000:]}"
            for p in self.processes
            if p.poll() is not None and p.pid not in self.killed
        ]

    def log(self, process: subprocess.Popen[bytes]) -> str:
        n = self.processes.index(process)
        return (self.log_dir / f"worker-{n}.log").read_text(errors="replace")

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for process in self.running():
            self.kill(process)
        for log in self._logs:
            log.close()


async def pending_by_pid(redis: Redis, settings: Settings) -> dict[int, int]:
    """Entries read but not acknowledged, by worker process id, over all partitions (a
    worker's consumer name is its id, `<host>-<pid>-<random>`)."""
    found: dict[int, int] = defaultdict(int)
    for partition in range(settings.partitions):
        try:
            summary = await redis.xpending(Keys(partition, settings.prefix).inbound, GROUP)
        except ResponseError:
            continue
        for consumer in summary["consumers"]:
            pid = consumer["name"].decode().rsplit("-", 2)[-2]
            found[int(pid) if pid.isdigit() else -1] += int(consumer["pending"])
    return found


async def pending_of(redis: Redis, settings: Settings, pid: int) -> int:
    """Entries read but not acknowledged by the worker process `pid`."""
    return (await pending_by_pid(redis, settings)).get(pid, 0)


async def kill_busy_and_replace(
    redis: Redis, settings: Settings, workers: Workers, rng: random.Random
) -> int:
    """SIGKILL a random worker, one holding a batch if any does within a few seconds, and start
    another; returns how many entries the victim left pending (read, not committed)."""
    busy: list[subprocess.Popen[bytes]] = []

    async def found() -> bool:
        pending = await pending_by_pid(redis, settings)
        busy[:] = [p for p in workers.running() if pending.get(p.pid)]
        return bool(busy)

    with contextlib.suppress(AssertionError):
        await wait_until(found, "a worker with a batch in hand", timeout=5)
    victim = rng.choice(busy or workers.running())
    workers.kill(victim)
    workers.start()
    return await pending_of(redis, settings, victim.pid)


async def wait_until(check: Callable[[], Awaitable[bool]], what: str, timeout: float) -> None:
    """Poll `check` every 50 ms until it holds; fail naming `what` after `timeout` seconds."""
    await until(check, what, timeout, every=0.05)


async def partition_quiet(redis: Redis, keys: Keys) -> bool:
    """Every entry of the log delivered to the group and acknowledged."""
    last = cast("list[StreamEntry]", await redis.xrevrange(keys.inbound, count=1))
    if not last:
        return True
    try:
        groups = await redis.xinfo_groups(keys.inbound)
    except ResponseError:
        return False
    group = next((g for g in groups if g["name"] == GROUP.encode()), None)
    return group is not None and group["pending"] == 0 and group["last-delivered-id"] == last[0][0]


async def open_turns(redis: Redis, settings: Settings, turns: Sequence[tuple[str, str]]) -> int:
    """How many of the (session, turn) pairs have no final snapshot yet (an archived turn's
    tombstone counts as final; a forgotten one, after twice the retention, as missing)."""
    if not turns:
        return 0
    keys = [keys_of(settings, session_id).turn(turn_id) for session_id, turn_id in turns]
    snapshots = await mget_any(redis, keys)
    return sum(1 for raw in snapshots if raw is None or not _final(raw))


def _final(raw: bytes) -> bool:
    return raw == TOMBSTONE or decode_turn(raw).state in FINAL_STATES


async def final_turns(redis: Redis, settings: Settings, turns: Sequence[tuple[str, str]]) -> int:
    return len(turns) - await open_turns(redis, settings, turns)


async def wait_owned(
    redis: Redis, settings: Settings, timeout: float = 30, workers: int = 1
) -> None:
    """Wait until the pool holds the lease of every partition and `workers` workers have joined
    it. A worker joins once it has started: one still starting when a fault comes exits ("cannot
    reach Redis"), as a worker does when Redis is away at its start, and a test of a running
    pool riding out the fault must not begin before all of it runs."""
    keys = [Keys(p, settings.prefix).lease for p in range(settings.partitions)]

    async def owned() -> bool:
        # ZCARD only when asked: the TLS pass runs some callers as the service's user, which
        # may not (docs/security.md), and one worker owning every partition has joined.
        if workers > 1 and await redis.zcard(workers_key(settings.prefix)) < workers:
            return False
        return all(await mget_any(redis, keys))

    await wait_until(owned, "every partition to have an owner", timeout)


async def busy_partitions(redis: Redis, settings: Settings) -> list[int]:
    """Partitions whose log is not yet entirely delivered and acknowledged."""
    parts = [Keys(p, settings.prefix) for p in range(settings.partitions)]
    return [keys.partition for keys in parts if not await partition_quiet(redis, keys)]


async def wait_quiet(
    redis: Redis, settings: Settings, turns: Sequence[tuple[str, str]], timeout: float = 120
) -> None:
    """Wait until every turn is final and every partition's log is delivered and acked."""

    async def quiet() -> bool:
        return not await busy_partitions(redis, settings) and not await open_turns(
            redis, settings, turns
        )

    try:
        await wait_until(quiet, "every turn final and every PEL empty", timeout)
    except AssertionError as exc:
        busy = await busy_partitions(redis, settings)
        still_open = await open_turns(redis, settings, turns)
        dead = len(await dead_letters(redis, settings))
        detail = f"busy partitions {busy}, {still_open} turns open, {dead} dead letters"
        raise AssertionError(f"{exc}: {detail}") from None


def keys_of(settings: Settings, session_id: str) -> Keys:
    return Keys(partition_of(session_id, settings.partitions), settings.prefix)


def decode_turn(raw: bytes) -> Turn:
    return _TURN.decode(raw)


async def dead_letters(redis: Redis, settings: Settings) -> dict[Source, dict[bytes, bytes]]:
    """Every dead letter of every partition, by source stream and entry id."""
    found: dict[Source, dict[bytes, bytes]] = {}
    for partition in range(settings.partitions):
        rows = cast("list[StreamEntry]", await redis.xrange(Keys(partition, settings.prefix).dead))
        for _, fields in rows:
            found[fields[b"source_stream"].decode(), fields[b"source_id"].decode()] = fields
    return found
