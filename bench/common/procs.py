"""The processes of the end-to-end benchmark: a private Redis and worker processes, always reaped.

Workers are `python -m terminus worker` children, each leading its own process group, so that
stopping one also stops anything it started; `WorkerPool.stop` sends SIGTERM to the groups, then
SIGKILL to any still alive after a grace period. `cpu_seconds` reads a child's CPU time from
/proc (Linux), for the per-event cost of a worker; `machine_busy_s` the whole machine's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Final, Self

from redis.asyncio import Redis

from terminus.service.redis.cluster import LocalCluster
from terminus.service.redis.connect import client_options, connect
from terminus.service.redis.embedded import EmbeddedRedis
from terminus.service.settings import Settings

STOP_GRACE_S: Final = 10.0
LOG_TAIL_CHARS: Final = 2000


class WorkerDied(RuntimeError):
    """A worker process exited during a measurement; the message ends with its log."""


class WorkerConfig:
    """What every worker of a pool is started with."""

    def __init__(
        self,
        url: str,
        prefix: str,
        partitions: int,
        batch_size: int,
        log_dir: Path,
        extra_env: Mapping[str, str] | None = None,
        module: str = "terminus worker",
        python: str | None = None,
    ) -> None:
        self.url, self.prefix, self.partitions = url, prefix, partitions
        # The interpreter each process runs: another checkout's, for an A/B across commits.
        self.python = python or sys.executable
        self.batch_size, self.log_dir = batch_size, log_dir
        self.extra_env = dict(extra_env or {})
        self.module = module  # what each process runs: `python -m <module>`

    def env(self) -> dict[str, str]:
        """Ours, then the service's settings, then `extra_env` (which may override them)."""
        return {
            **os.environ,
            "REDIS_URL": self.url,
            "TERMINUS_PREFIX": self.prefix,
            "TERMINUS_PARTITIONS": str(self.partitions),
            "TERMINUS_BATCH_SIZE": str(self.batch_size),
            **self.extra_env,
        }


class WorkerPool:
    """`size` worker processes on one prefix; a context manager that always stops them."""

    def __init__(self, config: WorkerConfig, size: int) -> None:
        self.config = config
        self.size = size
        self.processes: list[subprocess.Popen[bytes]] = []
        self.log_path = config.log_dir / f"workers-{config.prefix}.log"

    def start(self) -> Self:
        command = [self.config.python, "-m", *self.config.module.split()]
        with self.log_path.open("ab") as log:
            for _ in range(self.size):
                self.processes.append(
                    subprocess.Popen(
                        command,
                        env=self.config.env(),
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        return self

    def check_alive(self) -> None:
        """Raise if a worker exited: the benchmark would wait for it forever."""
        for process in self.processes:
            if process.poll() is not None:
                raise WorkerDied(
                    f"worker {process.pid} exited with {process.returncode}:\n{self.log_tail()}"
                )

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]
        return ""

    def cpu_seconds(self) -> list[float] | None:
        """User + system CPU of each live worker so far; None where /proc cannot tell."""
        each = [process_cpu_seconds(process.pid) for process in self.processes]
        return None if None in each else [s for s in each if s is not None]

    def stop(self) -> None:
        """SIGTERM every group (a worker finishes its batch, releases its leases), then SIGKILL."""
        for process in self.processes:
            _signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for process in self.processes:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(process, signal.SIGKILL)
                process.wait()
        self.processes.clear()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)  # the child leads its own group (start_new_session)


def process_cpu_seconds(pid: int) -> float | None:
    """utime + stime of `pid` from /proc/<pid>/stat, or None off Linux or once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command name may contain spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float | None:
    """CPU seconds all processes of the machine have used since boot (/proc/stat), None off
    Linux: on a shared machine, what others used during a phase shows how noisy it was."""
    try:
        with open("/proc/stat") as stat:
            ticks = [int(t) for t in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    idle, iowait = ticks[3], ticks[4]
    return (sum(ticks) - idle - iowait) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def redis_url(given: str | None, data_dir: Path, cluster: bool = False) -> Iterator[str]:
    """`given`, else the URL of a private redis-server with AOF (everysec) in `data_dir`, or
    with `cluster` of a node of a private local cluster (3 primaries, 3 replicas, AOF)."""
    if given:
        yield given
        return
    with LocalCluster(data_dir) if cluster else EmbeddedRedis(data_dir) as server:
        yield server.url


def run_on_redis(given: str | None, body: Callable[[Redis], Awaitable[None]]) -> None:
    """Run `body` with a client of `given`, else of a private redis-server (`redis_url`),
    the client closed and the server stopped after it: the frame of the single-client benches."""
    with tempfile.TemporaryDirectory() as data, redis_url(given, Path(data)) as url:
        asyncio.run(_with_client(url, body))


async def _with_client(url: str, body: Callable[[Redis], Awaitable[None]]) -> None:
    redis = connect(url, **client_options(Settings()))
    try:
        await body(redis)
    finally:
        await redis.aclose()


def raise_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C, so every `finally` (and worker cleanup) runs."""
    signal.signal(signal.SIGTERM, _exit)


def _exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)
