"""What the soak runs against: a private redis-server (AOF everysec, a free loopback port, never
the shared one), the blackhole proxy in a child process between the workers and that server,
and a pool of worker processes supervised as `terminus run` supervises them: a worker that exits
is replaced, and one that exits without being killed by the soak is reported as a crash.

The load, the checker and the memory sampler talk to Redis directly: only the workers' traffic
goes through the proxy, so a blackhole cuts the pool off as a network partition would.

With `cluster`, a private Redis Cluster instead (3 primaries, 3 replicas, service/redis/cluster.py)
that the workers reach directly: a cluster's fault is a primary's death, not a cut network.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from asyncio.subprocess import DEVNULL
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

import msgspec
from redis.asyncio import Redis

from terminus.service.redaction import SecretUrl
from terminus.service.redis.cluster import LocalCluster
from terminus.service.redis.connect import connect
from terminus.service.redis.embedded import EmbeddedRedis
from terminus.service.settings import Settings
from tests.support.faults import harness

SUPERVISE_S: Final = 0.5
SINK: Final = (sys.executable, "-m", "terminus", "sink")
LOG_TAIL: Final = 1500


@dataclass(frozen=True)
class RigConfig:
    """The pool: its size, partitions and lease, and the retention environment of its workers."""

    workers: int = 3
    partitions: int = 8
    lease_ttl_ms: int = 2000
    retain_ms: int = 5000
    archive_dir: Path | None = None
    cluster: bool = False
    sink: str | None = None  # the `--to` of a `terminus sink` process run beside the workers


class Rig:
    """Redis, proxy and supervised workers; everything started is stopped on exit."""

    def __init__(self, tmp: Path, config: RigConfig) -> None:
        self.tmp, self.config = tmp, config
        self.server = EmbeddedRedis(tmp / "redis")
        self.cluster = LocalCluster(tmp / "cluster") if config.cluster else None
        self.settings: Settings = harness.fault_settings(
            self.url,
            partitions=config.partitions,
            lease_ttl_ms=config.lease_ttl_ms,
            redis_cluster=config.cluster,
        )
        self.crashes: list[dict[str, Any]] = []
        self.workers: harness.Workers | None = None
        self.sinks: harness.Workers | None = None  # one `terminus sink`, supervised alike
        self.sink_crashes: list[dict[str, Any]] = []
        self._proxy: asyncio.subprocess.Process | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._noted: set[int] = set()

    @property
    def pool(self) -> harness.Workers:
        """The supervised workers (once started)."""
        assert self.workers is not None, "the rig is not started"
        return self.workers

    @property
    def url(self) -> str:
        """Where the soak's own clients go: the server, or one node of the cluster."""
        return self.cluster.url if self.cluster is not None else self.server.url

    def client(self) -> Redis:
        """A direct client for the load and the checks, with room for a slow restart."""
        return connect(
            self.url, cluster=self.config.cluster, socket_timeout=15, socket_connect_timeout=5
        )

    async def __aenter__(self) -> Self:
        worker_settings = self.settings
        if self.cluster is not None:
            await asyncio.to_thread(self.cluster.start)
        else:
            await asyncio.to_thread(self.server.start)
            proxy_port = await self._start_proxy()
            worker_settings = msgspec.structs.replace(
                self.settings, redis_url=SecretUrl(f"redis://127.0.0.1:{proxy_port}/0")
            )
        (self.tmp / "logs").mkdir()
        self.workers = harness.Workers(worker_settings, self.tmp / "logs")
        self.workers.env.update(self.retention_env())
        for _ in range(self.config.workers):
            self.workers.start()
        if self.config.sink is not None:
            self.sinks = await self._start_sink(worker_settings, self.config.sink)
        self._supervisor = asyncio.create_task(self._supervise())
        return self

    async def _start_sink(self, settings: Settings, url: str) -> harness.Workers:
        """Create the sink's schema, then start `terminus sink --to URL`: through the proxy, as
        the workers, so that their faults are its faults."""
        (self.tmp / "logs" / "sink").mkdir()
        sinks = harness.Workers(settings, self.tmp / "logs" / "sink", (*SINK, "--to", url))
        sinks.env.update(self.retention_env())
        migrate = await asyncio.create_subprocess_exec(
            *SINK, "migrate", "--to", url, env=sinks.env, cwd=harness.REPO, stdout=DEVNULL
        )  # its line would spoil `--json`
        if await migrate.wait():
            raise RuntimeError(f"terminus sink migrate --to {url} failed")
        sinks.start()
        return sinks

    def retention_env(self) -> dict[str, str]:
        """TERMINUS_RETAIN_MS and TERMINUS_ARCHIVE_DIR (no-ops in a build without retention)."""
        archive = self.config.archive_dir or self.tmp / "archive"
        return {
            "TERMINUS_RETAIN_MS": str(self.config.retain_ms),
            "TERMINUS_ARCHIVE_DIR": str(archive),
        }

    async def _start_proxy(self) -> int:
        command = [sys.executable, "-m", "bench.soak.proxy", str(self.server.port)]
        pipe = asyncio.subprocess.PIPE
        self._proxy = await asyncio.create_subprocess_exec(
            *command, stdin=pipe, stdout=pipe, start_new_session=True
        )
        assert self._proxy.stdout is not None
        line = await asyncio.wait_for(self._proxy.stdout.readline(), 30)
        return int(line)

    async def blackhole(self, seconds: float) -> None:
        """Silence every worker connection for `seconds`; returns once they flow again."""
        assert self._proxy is not None
        stdin, stdout = self._proxy.stdin, self._proxy.stdout
        assert stdin is not None
        assert stdout is not None
        stdin.write(f"blackhole {seconds}\n".encode())
        await stdin.drain()
        await stdout.readline()

    def report(self) -> dict[str, Any]:
        """Workers started, killed by the soak, and crashed (exited by themselves)."""
        pool = self.pool
        return {
            "started": len(pool.processes),
            "killed": len(pool.killed),
            "crashed": len(self.crashes),
            "crashes": self.crashes[:5],
        }

    async def _supervise(self) -> None:
        while True:
            await asyncio.sleep(SUPERVISE_S)
            self._revive(self.pool, self.config.workers, self.crashes)
            if self.sinks is not None:
                self._revive(self.sinks, 1, self.sink_crashes)

    def _revive(self, pool: harness.Workers, wanted: int, crashes: list[dict[str, Any]]) -> None:
        """Note the processes of `pool` that exited unkilled, and start new ones up to `wanted`."""
        for process in pool.processes:
            if process.poll() is None or process.pid in pool.killed:
                continue
            if process.pid not in self._noted:
                self._noted.add(process.pid)
                tail = pool.log(process)[-LOG_TAIL:]
                crashes.append({"pid": process.pid, "exit": process.returncode, "log": tail})
        for _ in range(wanted - len(pool.running())):
            pool.start()

    def sink_report(self) -> dict[str, Any]:
        """Sink processes started, killed by the soak, and crashed."""
        sinks = self.sinks
        return {
            "started": len(sinks.processes) if sinks else 0,
            "killed": len(sinks.killed) if sinks else 0,
            "crashed": len(self.sink_crashes),
            "crashes": self.sink_crashes[:5],
        }

    async def stop_workers(self) -> None:
        """Stop supervising and SIGKILL the workers: `replay --verify` wants a stopped pool, since
        a running archiver moves entries from the log to the archive while the replay reads."""
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
            self._supervisor = None
        for process in self.pool.running():
            self.pool.kill(process)
        if self.sinks is not None:
            for process in self.sinks.running():
                self.sinks.kill(process)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        for pool in (self.workers, self.sinks):
            if pool is not None:
                pool.__exit__(kind, exc, tb)
        if self._proxy is not None:
            with contextlib.suppress(ProcessLookupError):
                self._proxy.kill()
            await self._proxy.wait()
        self.server.stop()
        if self.cluster is not None:
            await asyncio.to_thread(self.cluster.stop)
