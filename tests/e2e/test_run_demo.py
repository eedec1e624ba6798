"""`terminus run` as a user runs it: a supervisor process, worker processes, the live demo, and a
clean stop on Ctrl-C (DESIGN section 9).

Output goes to files, not pipes: worker processes inherit the supervisor's stdout and stderr, so
with pipes a worker left behind would keep the test waiting for an end of file forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from asyncio.subprocess import Process
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final, cast

import pytest
from redis.asyncio import Redis

from terminus.service.keys import Keys, workers_key
from tests.support.polling import until

PARTITIONS: Final = 4
DEADLINE_S: Final = 30.0

OLA: Final = 'Olá! (That\'s "hi" in Portuguese)\n\nYou could also say "Oi!" which is a'
OLA_SHOWN: Final = OLA.replace("\n", "⏎")
OLA_MESSAGE: Final = (
    'message: \'Olá! (That\\\'s "hi" in Portuguese)\\n\\nYou could also say "Oi!" which is a more '
    "casual way to say hi in …'"
)
OLA_STREAMED: Final = OLA_SHOWN + " more casual way to say hi in Portuguese."
RUST: Final = "Rust focuses on three goals: **safety**, **speed**, and **concurrency**."
RETRY_WHY: Final = "    why: the provider answered with an error instead of an answer"


def proven(attempt: int, text: str) -> list[str]:
    """The lines of an attempt that streams `text` and ends with the provider's proof."""
    return [
        f"attempt {attempt} streams text: {text}",
        f"step 1 attempt {attempt}: streaming -> awaiting_terminal  (finish_step)",
        f"step 1 attempt {attempt}: awaiting_terminal -> finished  (prove)",
        "turn_finished: end_turn",
    ]


def retried(attempt: int, reason: str, detail: str = "") -> list[str]:
    """The lines from the announcement of retry `attempt` to its start."""
    return [
        f"retrying as attempt {attempt} in N ms: {reason}{detail}",
        "producer: retry_scheduled, waiting N ms",
        f"step 1 attempt {attempt}: retrying -> streaming  (start_attempt)",
    ]


START: Final = "step 1 attempt 1: pending -> streaming  (start_attempt)"
# Each scenario's block of output, every line in this order and no other (delays as N ms).
SCENARIOS: Final = {
    "[1] complete answer (anthropic)": [
        START,
        *proven(1, OLA_STREAMED),
        OLA_MESSAGE,
        "final state: finished",
    ],
    "[2] cut mid-stream, then retried (anthropic)": [
        START,
        f"attempt 1 streams text: {OLA_SHOWN}",
        "step 1 attempt 1: streaming -> truncated  (truncate)",
        "step 1 attempt 1: truncated -> retrying  (schedule_retry)",
        "attempt 1 discarded (missing_terminal): its 69 streamed characters leave every screen",
        f"    withdrawn: {OLA!r}",
        "    why: the stream closed before the provider's own end-of-answer event, so nothing "
        "proves the text was the whole answer",
        *retried(2, "missing_terminal"),
        *proven(2, OLA_STREAMED),
        OLA_MESSAGE,
        "final state: finished",
    ],
    "[3] empty synthesized finish, then retried (openai-chat)": [
        START,
        "step 1 attempt 1: streaming -> truncated  (truncate)",
        "step 1 attempt 1: truncated -> retrying  (schedule_retry)",
        "attempt 1 discarded (empty_other): nothing had streamed",
        "    why: the stream ended with a finish the SDK made up (reason `other`, no output "
        "tokens), not one the provider sent",
        *retried(2, "empty_other"),
        *proven(2, "Olá!"),
        "message: 'Olá!'",
        "final state: finished",
    ],
    "[4] rate limited, then complete (anthropic)": [
        START,
        "step 1 attempt 1: streaming -> retrying  (retry_error)",
        "attempt 1 discarded (rate_limit): nothing had streamed",
        RETRY_WHY,
        *retried(
            2,
            "rate_limit",
            " (This request would exceed your organization's rate limit of 20,000,000 prompt bytes "
            "per hour (org: …)",
        ),
        *proven(2, RUST),
        f"message: {RUST!r}",
        "final state: finished",
    ],
    "[5] overloaded until failure (anthropic)": [
        START,
        "step 1 attempt 1: streaming -> retrying  (retry_error)",
        "attempt 1 discarded (provider_unavailable): nothing had streamed",
        RETRY_WHY,
        *retried(2, "provider_unavailable", " (Overloaded)"),
        "step 1 attempt 2: streaming -> retrying  (retry_error)",
        "attempt 2 discarded (provider_unavailable): nothing had streamed",
        RETRY_WHY,
        *retried(3, "provider_unavailable", " (Overloaded)"),
        "step 1 attempt 3: streaming -> failed  (fail)",
        "agent_error provider_unavailable (retryable=True): Overloaded",
        "final state: failed",
    ],
}


def _interruptible() -> None:
    """Runs in the child before exec. A shell that starts pytest in the background leaves
    SIGINT ignored, and Python then installs no KeyboardInterrupt handler: restore the default,
    as an interactive terminal has it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Terminus:
    """`python -m terminus ARGS` under a unique prefix, its output in files of `directory`."""

    def __init__(self, redis: Redis, redis_url: str, prefix: str, directory: Path) -> None:
        self.redis, self.prefix, self.directory = redis, prefix, directory
        self.env = {
            **os.environ,
            "REDIS_URL": redis_url,
            "TERMINUS_PREFIX": prefix,
            "TERMINUS_PARTITIONS": str(PARTITIONS),
        }
        self.process: Process | None = None
        self.workers: set[int] = set()

    async def start(self, *args: str) -> Process:
        with (self.directory / "out").open("wb") as out, (self.directory / "err").open("wb") as err:
            command = [sys.executable, "-m", "terminus", *args]
            self.process = await asyncio.create_subprocess_exec(
                *command,
                env=self.env,
                cwd=self.directory,
                stdout=out,
                stderr=err,
                preexec_fn=_interruptible,
            )
        return self.process

    def output(self) -> tuple[str, str]:
        return (self.directory / "out").read_text(), (self.directory / "err").read_text()

    async def worker_pids(self) -> set[int]:
        """Pids of the live workers, from their ids (`<host>-<pid>-<random>`)."""
        members = cast("list[bytes]", await self.redis.zrange(workers_key(self.prefix), 0, -1))
        self.workers |= {int(m.decode().rsplit("-", 2)[1]) for m in members}
        return self.workers

    async def kill_all(self) -> None:
        """SIGKILL the supervisor and every worker of this prefix still running."""
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        for pid in await self.worker_pids():
            if self._ours(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def _ours(self, pid: int) -> bool:
        """Whether `pid` is still a worker of this test (a pid may have been reused since)."""
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            return False
        return f"TERMINUS_PREFIX={self.prefix}".encode() in environ.split(b"\0")


@pytest.fixture
async def terminus(
    redis: Redis, admin_redis: Redis, redis_url: str, prefix: str, tmp_path: Path
) -> AsyncIterator[Terminus]:
    """Runs `terminus` commands; whatever still runs afterwards is killed, never leaked. The
    test's own checks (EXISTS, ZCARD) go through `admin_redis`: `terminus` runs as `redis_url`'s
    user, whose rights may cover what the service sends and no more; `redis` clears the keys."""
    run = Terminus(admin_redis, redis_url, prefix, tmp_path)
    try:
        yield run
    finally:
        await run.kill_all()


async def leases(redis: Redis, prefix: str) -> int:
    """How many partition leases are held."""
    return int(await redis.exists(*(Keys(p, prefix).lease for p in range(PARTITIONS))))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def exited(process: Process) -> int:
    """The exit status, waiting at most DEADLINE_S."""
    return await asyncio.wait_for(process.wait(), DEADLINE_S)


def blocks(stdout: str) -> dict[str, list[str]]:
    """The lines of each scenario, by its heading line (`[n] title (provider)`), without their
    indent, each number of milliseconds written N."""
    found: dict[str, list[str]] = {}
    heading = None
    for line in stdout.splitlines():
        if re.match(r"\[\d+\] ", line):
            heading = line
            found[heading] = []
        elif line.startswith("demo complete."):
            heading = None
        elif heading is not None and line.strip():
            found[heading].append(re.sub(r"\d+ ms", "N ms", line.removeprefix("    ")))
    return found


async def test_run_demo_once_plays_every_scenario(terminus: Terminus) -> None:
    process = await terminus.start("run", "--demo", "--once", "--workers", "1")
    status = await exited(process)
    stdout, stderr = terminus.output()
    assert status == 0, stderr
    found = blocks(stdout)
    assert list(found) == list(SCENARIOS)
    for title, lines in SCENARIOS.items():
        assert found[title] == lines, title
    assert stdout.count("agent_error") == 1
    assert stdout.count("final state: finished") == 4
    assert "overloaded until failure: failed" in stdout.splitlines()[-1]
    assert await leases(terminus.redis, terminus.prefix) == 0
    assert await terminus.worker_pids() == set()
    # The demo's processes log warnings only: no "took partition" line per partition.
    assert " INFO " not in stderr, stderr


async def test_run_embedded_never_uses_the_configured_redis(terminus: Terminus) -> None:
    process = await terminus.start("run", "--embedded", "--demo", "--once", "--no-http")
    status = await exited(process)
    stdout, stderr = terminus.output()
    assert status == 0, stderr
    assert "(embedded, AOF in" in stderr
    assert stdout.count("final state: finished") == 4
    assert await terminus.redis.exists(workers_key(terminus.prefix)) == 0, "the test's Redis"


async def test_sigint_stops_run_cleanly(terminus: Terminus) -> None:
    redis, prefix = terminus.redis, terminus.prefix
    process = await terminus.start("run", "--workers", "1")

    async def all_leased() -> bool:
        return await leases(redis, prefix) == PARTITIONS

    await until(all_leased, "the worker to take every partition")
    pids = set(await terminus.worker_pids())
    assert len(pids) == 1
    process.send_signal(signal.SIGINT)
    status = await exited(process)

    _, stderr = terminus.output()
    assert status == 0, stderr
    assert "terminus: stopping" in stderr
    assert [pid for pid in pids if alive(pid)] == []
    assert await leases(redis, prefix) == 0
    assert await redis.zcard(workers_key(prefix)) == 0
