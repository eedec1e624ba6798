"""The children of `terminus run` end when it ends, however it ends (issue 31).

`terminus run` starts its workers, its gateway and its embedded Redis each in a session of its
own, so that a Ctrl-C reaches only the supervisor, which then stops them in order. Killed with
SIGKILL (the OOM killer, `kill -9`, a container runtime), it stops nothing, and its children
lived on as orphans: workers retrying a Redis that may be gone, a gateway holding its port. Two
lines of defence, both ending a child the way the supervisor would, with SIGTERM:

1. Linux: each child asks the kernel, between fork and exec, for SIGTERM when its parent dies
   (`prctl(PR_SET_PDEATHSIG)`), so this holds for redis-server too. The kernel sends it when
   the *thread* that forked the child ends: `terminus run` starts children from its main thread
   only. A parent that died before the request is caught by comparing the parent's pid.
2. Everywhere: a terminus child whose environment names its parent (`TERMINUS_PARENT_PID`)
   watches `os.getppid()` from a daemon thread; once it changes (the child was adopted by init
   or a subreaper), the child sends itself SIGTERM, and exits at once if that clean stop has
   not ended within `GRACE_S` (a stop can hang on a Redis that died with the supervisor).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, MutableMapping
from typing import Final

PARENT_ENV: Final = "TERMINUS_PARENT_PID"
POLL_S: Final = 0.5
GRACE_S: Final = 20.0
PR_SET_PDEATHSIG: Final = 1  # <linux/prctl.h>

# Loaded in the parent: a child between fork and exec should not take the loader's locks.
_LIBC: Final = (
    ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if sys.platform.startswith("linux")
    else None
)


def die_with_parent() -> Callable[[], None]:
    """A `preexec_fn` for a child of this process: on Linux, the kernel sends the child SIGTERM
    when this process dies; elsewhere, nothing (the child's own watch covers terminus children)."""
    parent = os.getpid()

    def request() -> None:
        if _LIBC is None:
            return
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # it died before the request: nobody will send the signal
            os.kill(os.getpid(), signal.SIGTERM)

    return request


def child_env(env: MutableMapping[str, str]) -> MutableMapping[str, str]:
    """`env` for a child that watches this process (see `watch_parent`)."""
    env[PARENT_ENV] = str(os.getpid())
    return env


def watch_parent(env: MutableMapping[str, str]) -> threading.Thread | None:
    """If `env` names this process's parent, stop this process once the parent is gone; the
    variable is removed, so that this process's own children do not watch the wrong parent."""
    text = env.pop(PARENT_ENV, "")
    if not text.isdigit():
        return None
    watcher = threading.Thread(
        target=_watch, args=(int(text),), name="terminus-lifeline", daemon=True
    )
    watcher.start()
    return watcher


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(POLL_S)
    print(f"terminus: parent {parent} is gone; stopping", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(GRACE_S)
    os._exit(1)
