"""The raw Redis reader of the fan-out benchmark (`python -m bench.fanout.baseline CONFIG`;
protocol in `bench.fanout.wire`).

One `XREAD BLOCK` loop over every session stream from its start, the same shape of read as the
gateway's hub, with nothing after it (and synchronous: redis-py's blocking client costs less
per call than its asyncio one, and this reader shares the machine). For each frame it keeps the
cursor, the time of the read that brought it (when the frame became visible to a direct reader
of Redis) and, for a text delta, the publish time the producer wrote into it. This is the
baseline the SSE subscribers' receive times are compared with, frame by frame.
"""

from __future__ import annotations

import math
import re
import sys
import time
from typing import Any, Final, cast

from redis import Redis

from bench.fanout import wire
from terminus.service.redis.replies import StreamReply

FIELD: Final = b"e"
CHUNK: Final = b'{"sessionUpdate":"agent_message_chunk"'
MARKER: Final = re.compile(rb"~(\d+)~")
COUNT: Final = 10_000
BLOCK_MS: Final = 100


def published_s(raw: bytes) -> float:
    """The publish time (seconds) marked in a text delta's frame; NaN for other frames."""
    if not raw.startswith(CHUNK):
        return math.nan
    found = MARKER.search(raw)
    return int(found.group(1)) / 1e6 if found else math.nan


class Follower:
    """XREADs every session stream after its cursor; what came, into `received`."""

    def __init__(self, redis: Redis, streams: list[str]) -> None:
        self.redis = redis
        self.cursors: dict[str, bytes | str] = dict.fromkeys(streams, "0-0")
        self.index = {s.encode(): n for n, s in enumerate(streams)}
        self.received = [wire.Received(session=n) for n in range(len(streams))]

    def step(self) -> None:
        streams = cast("dict[Any, Any]", self.cursors)
        reply = cast("StreamReply", self.redis.xread(streams, COUNT, BLOCK_MS) or [])
        now = time.monotonic()
        for stream, entries in reply:
            got = self.received[self.index[stream]]
            for entry_id, fields in entries:
                got.cursors.append(entry_id)
                got.times.append(now)
                got.published.append(published_s(fields.get(FIELD, b"")))
            self.cursors[stream.decode()] = entries[-1][0]


def run(config: wire.BaselineConfig) -> wire.ReaderResult:
    redis = Redis.from_url(config.url)
    follower = Follower(redis, config.streams)
    redis.ping()
    print(wire.READY, flush=True)
    line = wire.ExpectedLine()
    while line.value is None:
        follower.step()
    deadline = time.monotonic() + line.value.timeout_s
    while not wire.complete(follower.received, line.value) and time.monotonic() < deadline:
        follower.step()
    redis.close()
    ok = wire.complete(follower.received, line.value)
    return wire.ReaderResult(received=follower.received, complete=ok)


def main() -> None:
    config = wire.read(sys.argv[1], wire.BaselineConfig)
    wire.write(config.result_path, run(config))
    print(wire.DONE, flush=True)


if __name__ == "__main__":
    main()
