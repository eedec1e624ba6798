"""SSE subscribers of the fan-out benchmark, many in one process (`python -m bench.fanout.client
CONFIG`; protocol in `bench.fanout.wire`).

Lean on purpose, so that the client is not what limits the measurement: no asyncio, one epoll
loop over non-blocking sockets, one per subscriber, speaking HTTP/1.1; a chunked-encoding
decoder and an SSE splitter keep only the `id:` line of each event (the frame's cursor) and the
time of the poll that brought it; no JSON is parsed.
"""

from __future__ import annotations

import select
import socket
import sys
import time
from typing import Final

from bench.fanout import wire

READ_BYTES: Final = 1 << 16
EVENT_END: Final = b"\r\n\r\n"  # sse-starlette ends lines with CRLF
ID_LINE: Final = b"id: "
READY_TIMEOUT_S: Final = 60.0
POLL_S: Final = 0.05


class Chunked:
    """Decodes an HTTP/1.1 chunked body fed in arbitrary pieces."""

    def __init__(self) -> None:
        self.pending = b""
        self.left = 0  # bytes of the current chunk's data not yet seen
        self.ended = False

    def feed(self, data: bytes) -> bytes:
        buf = self.pending + data if self.pending else data
        out: list[bytes] = []
        pos, size = 0, len(buf)
        while pos < size and not self.ended:
            if self.left:
                take = min(self.left, size - pos)
                out.append(buf[pos : pos + take])
                pos += take
                self.left -= take
                continue
            end = buf.find(b"\r\n", pos)
            if end < 0:
                break
            line, pos = buf[pos:end], end + 2
            if line:  # an empty line is the CRLF closing a chunk's data
                self.left = int(line.split(b";", 1)[0], 16)
                self.ended = self.left == 0
        self.pending = buf[pos:]
        return b"".join(out)


class Subscriber:
    """One SSE connection to one session's updates, read when epoll says it is readable."""

    def __init__(self, session: int, sock: socket.socket) -> None:
        self.got = wire.Received(session=session)
        self.sock = sock
        self.head: bytes | None = b""  # None once the response head is read
        self.chunked, self.body = Chunked(), b""

    def readable(self, now: float) -> bool:
        """Take what arrived; False once the stream has ended or failed."""
        try:
            data = self.sock.recv(READ_BYTES)
        except BlockingIOError:
            return True
        except OSError as exc:
            self.got.error = repr(exc)
            return False
        if not data:
            self.got.error = "the gateway closed the stream"
            return False
        if self.head is not None:
            data = self.take_head(data)
        if data:
            self.take_body(data, now)
        return not self.got.error

    def take_head(self, data: bytes) -> bytes:
        head = self.head = (self.head or b"") + data
        end = head.find(EVENT_END)
        if end < 0:
            return b""
        status = head.split(b"\r\n", 1)[0]
        if b" 200 " not in status or b"chunked" not in head[:end].lower():
            self.got.error = f"unexpected response: {head[:200]!r}"
        self.head = None
        return head[end + len(EVENT_END) :]

    def take_body(self, data: bytes, now: float) -> None:
        *events, self.body = (self.body + self.chunked.feed(data)).split(EVENT_END)
        for event in events:
            if event.startswith(ID_LINE):
                end = event.find(b"\r\n")
                self.got.cursors.append(event[4:end] if end > 0 else event[4:])
                self.got.times.append(now)


def connect(host: str, port: int, path: str) -> socket.socket:
    sock = socket.create_connection((host, port))
    request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\n\r\n"
    sock.sendall(request.encode())
    sock.setblocking(False)
    return sock


class Loop:
    """Every subscriber's socket in one epoll."""

    def __init__(self, config: wire.ClientConfig) -> None:
        self.poller = select.epoll()
        self.subscribers: dict[int, Subscriber] = {}
        for session, path in zip(config.sessions, config.paths, strict=True):
            sock = connect(config.host, config.port, path)
            self.subscribers[sock.fileno()] = Subscriber(session, sock)
            self.poller.register(sock.fileno(), select.EPOLLIN)
        self.received = [s.got for s in self.subscribers.values()]

    def step(self, timeout_s: float) -> None:
        events = self.poller.poll(timeout_s)
        now = time.monotonic()
        for fd, _ in events:
            if not self.subscribers[fd].readable(now):
                self.poller.unregister(fd)

    def heads_read(self) -> bool:
        return all(s.head is None or s.got.error for s in self.subscribers.values())


def run(config: wire.ClientConfig) -> wire.ReaderResult:
    loop = Loop(config)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not loop.heads_read():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no response within {READY_TIMEOUT_S:.0f}s")
        loop.step(POLL_S)
    print(wire.READY, flush=True)
    line = wire.ExpectedLine()
    while line.value is None:
        loop.step(POLL_S)
    deadline = time.monotonic() + line.value.timeout_s
    while not wire.complete(loop.received, line.value) and time.monotonic() < deadline:
        loop.step(POLL_S)
    ok = wire.complete(loop.received, line.value) and not any(r.error for r in loop.received)
    return wire.ReaderResult(received=loop.received, complete=ok)


def main() -> None:
    config = wire.read(sys.argv[1], wire.ClientConfig)
    wire.write(config.result_path, run(config))
    print(wire.DONE, flush=True)


if __name__ == "__main__":
    main()
