"""Child processes of the benchmarks besides the workers: the gateway (the fan-out's and the
soak's) and the fan-out's readers.

Each child leads its own process group (as the workers of `bench.common.procs` do) and `stop`
sends SIGTERM to the group, then SIGKILL after a grace period. The gateway is
`python -m terminus gateway` (uvicorn, one hub); readers (`bench.fanout.client`,
`bench.fanout.baseline`) talk the line protocol of `bench.fanout.wire` on stdin and stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from bench.common.procs import LOG_TAIL_CHARS, STOP_GRACE_S, WorkerDied, process_cpu_seconds

HEALTH_TIMEOUT_S: Final = 30.0


class Child:
    """One child process, its log in `log_path`; with `talk`, its stdin and stdout are pipes."""

    def __init__(self, name: str, command: list[str], env: Mapping[str, str], log: Path) -> None:
        self.name, self.command, self.env, self.log_path = name, command, dict(env), log
        self.process: asyncio.subprocess.Process | None = None

    async def start(self, talk: bool = False) -> Child:
        pipe = asyncio.subprocess.PIPE if talk else asyncio.subprocess.DEVNULL
        with self.log_path.open("ab") as log:
            self.process = await asyncio.create_subprocess_exec(
                *self.command,
                env=self.env,
                stdin=pipe,
                stdout=pipe if talk else log,
                stderr=log,
                start_new_session=True,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None, "not started"
        return self.process.pid

    def cpu_s(self) -> float | None:
        return process_cpu_seconds(self.pid)

    def check_alive(self) -> None:
        if self.process is not None and self.process.returncode is not None:
            raise WorkerDied(
                f"{self.name} exited with {self.process.returncode}:\n{self.log_tail()}"
            )

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]
        return ""

    async def expect(self, line: str, timeout_s: float) -> None:
        """Wait for `line` on the child's stdout; raise if it ends or the time runs out."""
        assert self.process is not None
        assert self.process.stdout is not None
        try:
            got = await asyncio.wait_for(self.process.stdout.readline(), timeout_s)
        except TimeoutError:
            raise TimeoutError(f"{self.name}: no {line!r} within {timeout_s:.0f}s") from None
        if got.decode().strip() != line:
            raise WorkerDied(f"{self.name} said {got!r}, not {line!r}:\n{self.log_tail()}")

    def tell(self, text: str) -> None:
        assert self.process is not None
        assert self.process.stdin is not None
        self.process.stdin.write(text.encode() + b"\n")

    async def stop(self) -> None:
        """SIGTERM to the group, then SIGKILL to what is still alive after the grace period."""
        process = self.process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), STOP_GRACE_S)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()


def gateway(env: Mapping[str, str], host: str, port: int, log: Path) -> Child:
    command = [sys.executable, "-m", "terminus", "gateway", "--http", f"{host}:{port}"]
    return Child("gateway", command, env, log)


async def wait_healthy(host: str, port: int, child: Child) -> None:
    """Poll `/healthz` until the gateway answers 200 (Redis reachable, routes up)."""
    deadline = asyncio.get_running_loop().time() + HEALTH_TIMEOUT_S
    while asyncio.get_running_loop().time() < deadline:
        child.check_alive()
        with contextlib.suppress(OSError):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(f"GET /healthz HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
            status = await reader.readline()
            writer.close()
            if b" 200 " in status:
                return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"the gateway did not answer /healthz within {HEALTH_TIMEOUT_S:.0f}s")
