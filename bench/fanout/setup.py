"""The names of one fan-out run and the CPU readings of its processes (see `bench.fanout`)."""

from __future__ import annotations

import argparse
import os
import resource
import secrets
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from redis.asyncio import Redis

from bench.common.children import Child
from bench.common.procs import WorkerPool, machine_busy_s
from bench.common.redis_ops import server_usage
from bench.fanout import wire
from terminus.service.gateway.tokens import SECRET_VAR, mint
from terminus.service.keys import keys_for_session
from terminus.service.redis.embedded import free_port

HOST: Final = "127.0.0.1"
PARTITIONS: Final = 16


class Setup:
    """Names of one run: prefix, sessions, their streams, the token secret, the gateway port."""

    def __init__(self, args: argparse.Namespace, url: str, work: Path) -> None:
        self.args, self.url, self.work = args, url, work
        self.prefix = f"bench-fan-{uuid.uuid4().hex[:8]}"
        self.sessions = [f"fan-{k:04d}" for k in range(args.sessions)]
        self.streams = [
            keys_for_session(s, PARTITIONS, self.prefix).session(s) for s in self.sessions
        ]
        self.secret = secrets.token_urlsafe(32)
        self.port = free_port()

    def service_env(self) -> dict[str, str]:
        return {
            **os.environ,
            "REDIS_URL": self.url,
            "TERMINUS_PREFIX": self.prefix,
            "TERMINUS_PARTITIONS": str(PARTITIONS),
            SECRET_VAR: self.secret,
        }

    def readers(self) -> list[Child]:
        """The raw reader, then the client processes, each with its share of subscribers."""
        args, work = self.args, self.work
        base = wire.BaselineConfig(
            url=self.url, streams=self.streams, result_path=result_path(work, "baseline")
        )
        children = [reader("bench.fanout.baseline", "baseline", base, work)]
        expires = int(time.time()) + 3600 + int(args.seconds)
        for c in range(args.clients):
            subscribers = range(c, args.subscribers, args.clients)
            sessions = [j % args.sessions for j in subscribers]
            # A token of its own for each subscriber (expiring a second apart), as each frontend
            # gets one: a session's subscribers beyond TERMINUS_MAX_STREAMS_PER_TOKEN on one
            # token would be refused (429), and the run would measure fewer than it reports.
            paths = [
                f"/v1/sessions/{self.sessions[s]}/updates?token="
                + mint(self.secret.encode(), self.sessions[s], expires + j)
                for j, s in zip(subscribers, sessions, strict=True)
            ]
            name = f"client{c}"
            config = wire.ClientConfig(
                host=HOST,
                port=self.port,
                sessions=sessions,
                paths=paths,
                result_path=result_path(work, name),
            )
            children.append(reader("bench.fanout.client", name, config, work))
        return children


def reader(module: str, name: str, config: object, work: Path) -> Child:
    """A reader process of `module`, its config written to a file in `work`."""
    path = work / f"{name}.config"
    wire.write(path, config)
    return Child(name, [sys.executable, "-m", module, str(path)], os.environ, work / f"{name}.log")


def result_path(work: Path, name: str) -> str:
    """Where reader `name` writes its result."""
    return str(work / f"{name}.result")


class Usage:
    """CPU seconds so far of each component, and the monotonic time of the reading."""

    def __init__(self, values: dict[str, float | None], at: float) -> None:
        self.values, self.at = values, at

    @classmethod
    async def read(
        cls, redis: Redis, pool: WorkerPool, gw: Child, readers: Sequence[Child]
    ) -> Usage:
        workers = pool.cpu_seconds()
        own = resource.getrusage(resource.RUSAGE_SELF)
        clients = [c.cpu_s() for c in readers[1:]]
        return cls(
            {
                "gateway": gw.cpu_s(),
                "clients": None if None in clients else sum(c or 0 for c in clients),
                "baseline_reader": readers[0].cpu_s(),
                "worker": None if workers is None else sum(workers),
                "redis": (await server_usage(redis)).cpu_s,
                "producer": own.ru_utime + own.ru_stime,
                "machine": machine_busy_s(),
            },
            time.monotonic(),
        )

    def since(self, before: Usage) -> dict[str, float | None]:
        return {k: _minus(v, before.values[k]) for k, v in self.values.items()}


def _minus(after: float | None, before: float | None) -> float | None:
    return None if after is None or before is None else after - before
