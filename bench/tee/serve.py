"""The benchmark's provider: `python -m bench.tee.serve PORT NAME=FILE...` answers each request
on 127.0.0.1:PORT whose path starts with `/NAME` with FILE's bytes as a 200 event stream, one SSE
event per write, as a provider flushes them; it prints `ready` once it listens. A process of its
own, so that its CPU is not the app's."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from terminus.service.redis.embedded import free_port

ROOT: Final = Path(__file__).parents[2]  # where `python -m bench.tee.serve` is found
HEAD: Final = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"


def events(body: bytes) -> list[bytes]:
    """The body cut after each blank line (LF or CRLF framing), the pieces a provider flushes."""
    cut = b"\r\n\r\n" if b"\r\n\r\n" in body else b"\n\n"
    pieces = body.split(cut)
    return [piece + cut for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])


async def serve(port: int, bodies: dict[str, list[bytes]]) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        await reader.readexactly(length)
        path = head.split(b" ", 2)[1].decode()
        writer.write(HEAD)
        for piece in bodies[path.split("/")[1]]:
            writer.write(piece)
            await writer.drain()
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(answer, "127.0.0.1", port)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    port, *named = sys.argv[1:]
    bodies = {}
    for pair in named:
        name, path = pair.split("=", 1)
        bodies[name] = events(Path(path).read_bytes())
    asyncio.run(serve(int(port), bodies))


if __name__ == "__main__":
    main()


@contextlib.contextmanager
def running(bodies: dict[str, Path]) -> Iterator[str]:
    """This provider in a child process, serving `bodies` by name; yields its base URL."""
    port = free_port()
    pairs = [f"{name}={path}" for name, path in bodies.items()]
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.tee.serve", str(port), *pairs],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert child.stdout is not None
        if child.stdout.readline().strip() != b"ready":
            raise RuntimeError(f"bench.tee.serve did not start (exit status {child.wait()})")
        yield f"http://127.0.0.1:{port}"
    finally:
        child.terminate()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
