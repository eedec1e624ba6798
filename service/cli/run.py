"""`terminus run`: Redis (configured, local, or embedded), a pool of worker processes, the HTTP
gateway, the demo.

Workers (`terminus worker`, the FastStream app) and the gateway (`terminus gateway`) are separate
OS processes, each in its own session so that Ctrl-C reaches only this supervisor, which then
stops them in order: workers and gateway first (workers finish their batch and release their
leases), the embedded Redis last. A process that dies is started again. If this supervisor dies
without stopping them (SIGKILL), they stop by themselves (service/cli/lifeline.py).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from terminus.service.cli.demo import run_demo
from terminus.service.cli.lifeline import child_env, die_with_parent
from terminus.service.gateway.tokens import TokenError, local_keyring
from terminus.service.redaction import redacted_url
from terminus.service.redis.connect import connect
from terminus.service.redis.embedded import LOCAL_URL, EmbeddedRedis, can_bind, ensure_redis
from terminus.service.settings import Settings
from terminus.service.shape import ShapeError, settled

STOP_TIMEOUT_S: Final = 20.0
DATA_DIR: Final = Path("var") / "redis"


class Pool:
    """Service processes on one Redis URL (`size` workers, then any `extra` commands), each
    restarted when it dies."""

    def __init__(
        self,
        url: str,
        size: int,
        extra: Sequence[Sequence[str]] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.url = url
        self.env = dict(env or {})
        self.commands = [["worker"]] * size + [list(c) for c in extra]
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        self.processes = [self._spawn(c) for c in self.commands]

    def _spawn(self, command: Sequence[str]) -> subprocess.Popen[bytes]:
        env = child_env({**os.environ, **self.env, "REDIS_URL": self.url})
        argv = [sys.executable, "-m", "terminus", *command]
        return subprocess.Popen(argv, env=env, start_new_session=True, preexec_fn=die_with_parent())

    def revive(self) -> int:
        """Start again every process that exited; returns how many."""
        dead = [n for n, p in enumerate(self.processes) if p.poll() is not None]
        for n in dead:
            name = self.commands[n][0]
            print(
                f"terminus: {name} {self.processes[n].pid} exited; starting another",
                file=sys.stderr,
            )
            self.processes[n] = self._spawn(self.commands[n])
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


def run_service(
    settings: Settings,
    *,
    workers: int,
    demo: bool,
    once: bool,
    http: tuple[str, int] | None = None,
    embedded: bool = False,
) -> int:
    """The main job; returns the exit code. Ctrl-C (SIGINT) or SIGTERM stop it cleanly."""
    signal.signal(signal.SIGTERM, _raise_interrupt)
    if http is not None:
        _token_keys()
    url, server = ensure_redis(settings, DATA_DIR, embedded=embedded, preexec=die_with_parent())
    extra = companions(settings)
    if http is not None and can_bind(http[1], http[0]):
        extra.append(["gateway", "--http", f"{http[0]}:{http[1]}"])
        print(
            f"terminus: HTTP gateway on http://{http[0]}:{http[1]} "
            "(tokens: terminus token SESSION); inspector: "
            f"http://{http[0]}:{http[1]}/inspect (sign in with: terminus token --admin)",
            file=sys.stderr,
        )
    elif http is not None:
        print(
            f"terminus: {http[0]}:{http[1]} is in use; no HTTP gateway (see --http)",
            file=sys.stderr,
        )
    # The demo's own lines tell its story; the processes' INFO lines would drown them.
    quiet = (
        {"TERMINUS_LOG_LEVEL": "warning"} if demo and "TERMINUS_LOG_LEVEL" not in os.environ else {}
    )
    pool = Pool(url, workers, extra, quiet)
    try:
        settings = asyncio.run(_shaped(url, settings))
        print(
            f"terminus: Redis at {_where(url, server)}, {workers} worker(s), "
            f"{settings.partitions} partitions",
            file=sys.stderr,
        )
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
    except ShapeError as exc:  # before any process started: each would refuse it in turn
        print(f"terminus run: {exc}", file=sys.stderr)
        return 1
    finally:
        pool.stop()
        if server is not None:
            server.stop()


def companions(settings: Settings) -> list[list[str]]:
    """The commands that run beside the workers whatever the gateway does: with
    `TERMINUS_TRACES=1`, `terminus traces`, which exports each turn's spans as it ends."""
    if not settings.traces:
        return []
    print(
        "terminus: exporting spans of every turn (terminus traces, docs/traces.md)", file=sys.stderr
    )
    return [["traces"]]


async def _shaped(url: str, settings: Settings) -> Settings:
    """The pool's shape, recorded if this is its first start (service/shape.py)."""
    redis = connect(url, cluster=settings.redis_cluster)
    try:
        return await settled(redis, settings, by="pool")
    finally:
        await redis.aclose()


async def _demo(url: str, settings: Settings) -> None:
    redis = connect(url, cluster=settings.redis_cluster)
    try:
        states = await run_demo(redis, settings)
    finally:
        await redis.aclose()
    summary = ", ".join(f"{title}: {state}" for title, state in states.items())
    print(f"\ndemo complete. {summary}", flush=True)


def _token_keys() -> None:
    """Read (or make, and announce) the gateway's token keys here, before the demo's first line
    and before any gateway process: a bad key setting stops the run with one line rather than
    a gateway that dies at every restart."""
    try:
        local_keyring(os.environ)
    except TokenError as exc:
        raise SystemExit(f"terminus run: {exc}") from None


def _where(url: str, server: EmbeddedRedis | None) -> str:
    if server is None and url == LOCAL_URL:
        return f"{redacted_url(url)} (found answering there; --embedded starts a private one)"
    if server is None:
        return redacted_url(url)
    return f"{redacted_url(url)} (embedded, AOF in {server.data_dir})"


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
