"""`terminus run`: Redis (configured, local, or embedded), a pool of worker processes, the demo.

Workers are separate OS processes (`terminus worker`, the FastStream app), each in its own
session so that Ctrl-C reaches only this supervisor, which then stops them in order: workers
first (they finish their batch and release their leases), the embedded Redis last. A worker
that dies is started again.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

from redis.asyncio import Redis

from service.demo import run_demo
from service.embedded import EmbeddedRedis, ensure_redis
from service.settings import Settings

STOP_TIMEOUT_S: Final = 20.0
DATA_DIR: Final = Path("var") / "redis"


class Pool:
    """N worker processes on one Redis URL, restarted when they die."""

    def __init__(self, url: str, size: int) -> None:
        self.url = url
        self.size = size
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        self.processes = [self._spawn() for _ in range(self.size)]

    def _spawn(self) -> subprocess.Popen[bytes]:
        env = {**os.environ, "REDIS_URL": self.url}
        command = [sys.executable, "-m", "service", "worker"]
        return subprocess.Popen(command, env=env, start_new_session=True)

    def revive(self) -> int:
        """Start again every worker that exited; returns how many."""
        dead = [n for n, p in enumerate(self.processes) if p.poll() is not None]
        for n in dead:
            print(f"terminus: worker {self.processes[n].pid} exited; starting another",
                  file=sys.stderr)  # fmt: skip
            self.processes[n] = self._spawn()
        return len(dead)

    def stop(self) -> None:
        """SIGTERM all, wait for each to finish its batch and release its leases, then SIGKILL."""
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for process in self.processes:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def run_service(settings: Settings, *, workers: int, demo: bool, once: bool) -> int:
    """The main job; returns the exit code. Ctrl-C (SIGINT) or SIGTERM stop it cleanly."""
    signal.signal(signal.SIGTERM, _raise_interrupt)
    url, server = ensure_redis(settings, DATA_DIR)
    pool = Pool(url, workers)
    print(f"terminus: Redis at {_where(url, server)}, {workers} worker(s), "
          f"{settings.partitions} partitions", file=sys.stderr)  # fmt: skip
    try:
        pool.start()
        if demo:
            asyncio.run(_demo(url, settings))
            if once:
                return 0
        print("terminus: running; Ctrl-C stops", file=sys.stderr)
        while True:
            time.sleep(1.0)
            pool.revive()
    except KeyboardInterrupt:
        print("\nterminus: stopping", file=sys.stderr)
        return 0
    finally:
        pool.stop()
        if server is not None:
            server.stop()


async def _demo(url: str, settings: Settings) -> None:
    redis = Redis.from_url(url)
    try:
        states = await run_demo(redis, settings)
    finally:
        await redis.aclose()
    summary = ", ".join(f"{title}: {state}" for title, state in states.items())
    print(f"\ndemo complete. {summary}", flush=True)


def _where(url: str, server: EmbeddedRedis | None) -> str:
    if server is None:
        return url
    return f"{url} (embedded, AOF in {server.data_dir})"


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
