"""What the fan-out benchmark's reader processes are told and what they hand back.

Each reader process (`bench.fanout.client`: SSE subscribers; `bench.fanout.baseline`: the raw
Redis reader) takes a config file (msgpack) as its argument, prints `ready` once it follows its
streams, then reads one `Expected` line (JSON) on stdin: the frames each session stream holds
once the producer has stopped and the worker has drained. It stops when every stream it follows
has delivered that many frames (or at the deadline), writes its result file (msgpack) and prints
`done`. Times are `time.monotonic()` seconds, one clock for every process of the machine.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Final, TypeVar

import msgspec

READY: Final = "ready"
DONE: Final = "done"

T = TypeVar("T")


class ClientConfig(msgspec.Struct, frozen=True, kw_only=True):
    """SSE subscribers of one client process: each one's session index and request path."""

    host: str
    port: int
    sessions: list[int]
    paths: list[str]
    result_path: str


class BaselineConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The session streams (by session index) the raw reader XREADs from their start."""

    url: str
    streams: list[str]
    result_path: str


class Expected(msgspec.Struct, frozen=True, kw_only=True):
    """Frames in each session stream (by session index), and how long to wait for them."""

    counts: list[int]
    timeout_s: float


class Received(msgspec.Struct, kw_only=True):
    """What one follower of one session got: the cursors in arrival order and when each came."""

    session: int
    cursors: list[bytes] = msgspec.field(default_factory=list)
    times: list[float] = msgspec.field(default_factory=list)
    published: list[float] = msgspec.field(default_factory=list)  # baseline only; NaN: no marker
    error: str = ""


class ReaderResult(msgspec.Struct, kw_only=True):
    """Everything a reader process received; whether every stream it follows was complete
    before the deadline."""

    received: list[Received]
    complete: bool = False


def write(path: str | Path, value: object) -> None:
    Path(path).write_bytes(msgspec.msgpack.encode(value))


def read(path: str | Path, kind: type[T]) -> T:
    return msgspec.msgpack.decode(Path(path).read_bytes(), type=kind)


def complete(received: Sequence[Received], expected: Expected) -> bool:
    """Whether every follower has its session's count (or failed)."""
    return all(len(r.cursors) >= expected.counts[r.session] or r.error for r in received)


class ExpectedLine:
    """The `Expected` line, read from stdin by a thread, so the reader's loop never blocks on it."""

    def __init__(self) -> None:
        self.value: Expected | None = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        self.value = msgspec.json.decode(sys.stdin.readline(), type=Expected)
