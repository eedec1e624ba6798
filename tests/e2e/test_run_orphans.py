"""`terminus run` killed with SIGKILL leaves nothing behind: its workers, its gateway and its
embedded Redis exit within a bound, and the gateway's port is free again.

Issue 31, item 7: the children lived on as orphans, retrying a Redis that may be gone and holding
the gateway's port. Output goes to files: an orphan holding a pipe would keep the test waiting.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Final, NamedTuple

import httpx
import pytest

from terminus.service.redis.embedded import can_bind, free_port

PROC: Final = Path("/proc")
BOUND_S: Final = 30.0  # the children's clean stop, else their hard exit (lifeline.GRACE_S)
CHILDREN: Final = 4  # two workers, the gateway, the embedded Redis

pytestmark = pytest.mark.skipif(not (PROC / "self" / "stat").exists(), reason="reads /proc")

Identity = tuple[int, str]  # a pid and its start time: a pid may be reused


class Run(NamedTuple):
    process: subprocess.Popen[bytes]
    port: int
    children: set[Identity]


def stat_of(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name, or None if there is no such pid."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def children_of(parent: int) -> set[Identity]:
    """Every live process whose parent is `parent` (state, ppid and start time from /proc)."""
    found = set()
    for entry in PROC.iterdir():
        fields = stat_of(int(entry.name)) if entry.name.isdigit() else None
        if fields and int(fields[1]) == parent and fields[0] != "Z":
            found.add((int(entry.name), fields[19]))
    return found


def alive(process: Identity) -> bool:
    """Whether that very process still runs (a zombie waiting for its reaper has exited)."""
    fields = stat_of(process[0])
    return fields is not None and fields[19] == process[1] and fields[0] != "Z"


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    """`terminus run --embedded` with a gateway on a free port, in `tmp_path`; the children the
    test finds are killed after it if they still run."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env |= {"TERMINUS_PREFIX": f"t-{uuid.uuid4().hex}", "TERMINUS_PARTITIONS": "4"}
    env["TERMINUS_TOKEN_SECRET"] = uuid.uuid4().hex
    command = [sys.executable, "-m", "terminus", "run", "--embedded", "--workers", "2"]
    with (tmp_path / "out").open("wb") as out, (tmp_path / "err").open("wb") as err:
        process = subprocess.Popen(
            [*command, "--http", f"127.0.0.1:{port}"],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=err,
        )
    children: set[Identity] = set()
    try:
        yield Run(process, port, children)
    finally:
        process.kill()
        process.wait()
        for child in children:
            if alive(child):
                os.kill(child[0], signal.SIGKILL)


def wait_serving(pid: int, port: int) -> set[Identity]:
    """The supervisor's children, once all are started and the gateway answers."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        children = children_of(pid)
        try:
            healthy = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            healthy = False
        if healthy and len(children) == CHILDREN:
            return children
        time.sleep(0.2)
    raise AssertionError(f"not serving after 60 s: children {children_of(pid)}")


def test_sigkill_of_run_leaves_no_child_and_frees_the_port(
    run: Run,
) -> None:
    process, port, children = run
    children |= wait_serving(process.pid, port)
    process.send_signal(signal.SIGKILL)
    process.wait()
    killed = time.monotonic()
    while any(alive(child) for child in children) and time.monotonic() - killed < BOUND_S:
        time.sleep(0.1)
    left = {child for child in children if alive(child)}
    assert left == set(), f"still running {BOUND_S} s after the SIGKILL: {left}"
    assert can_bind(port)
    print(f"all {len(children)} children gone {time.monotonic() - killed:.1f} s after SIGKILL")


# A parent that starts one child as `terminus run` does, without the Linux request (`preexec_fn`),
# prints the child's pid and waits: only the child's own watch can end it.
PARENT: Final = """
import os, subprocess, sys
from terminus.service.cli.lifeline import child_env
child = subprocess.Popen(
    [sys.executable, "-c", sys.argv[1]], env=child_env(dict(os.environ)), start_new_session=True
)
print(child.pid, flush=True)
child.wait()
"""
CHILD: Final = """
import os, time
from terminus.service.cli.lifeline import watch_parent
watch_parent(os.environ)
time.sleep(120)
"""


def test_without_the_kernel_s_help_a_child_watches_its_parent() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, CHILD], stdout=subprocess.PIPE, start_new_session=True
    )
    assert parent.stdout is not None
    with parent.stdout:
        pid = int(parent.stdout.readline())
    fields = stat_of(pid)
    assert fields is not None
    child = (pid, fields[19])
    try:
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 5
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(child)
    finally:
        if alive(child):
            os.kill(pid, signal.SIGKILL)
