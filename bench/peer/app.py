"""The straightforward implementation a user would write instead of terminus: a FastStream
subscriber per partition's inbound stream, each message folded through the same core
(`evolve`) and its frames XADDed to the session streams, one message at a time.

It keeps what a first version keeps: the turns in memory, the frames written before the ack
(FastStream acks a message once its handler returns), a message the core refuses logged and
acked. It leaves out what terminus adds and pays for: no snapshot of a turn (a restart loses
every open turn), no atomic commit (a crash between the XADD and the ack writes the frames
twice), no lease (two processes would fold the same turn apart, so it runs as one process), no
messages, partials, commands or dead letters. It is a peer for speed, not for guarantees: every
cost it skips makes it faster, not slower.

Its settings are the worker's: REDIS_URL, TERMINUS_PREFIX, TERMINUS_PARTITIONS.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Final

from faststream import FastStream
from faststream.redis import RedisBroker, StreamSub
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from terminus.events.codec import CodecError, decode_event, encode_json
from terminus.service.keys import FIELD, GROUP, Keys, keys_for_session
from terminus.statemachines.config import DEFAULT_CONFIG
from terminus.statemachines.errors import CoreError
from terminus.statemachines.fold import evolve
from terminus.statemachines.outputs import Outputs
from terminus.statemachines.turn import Turn

log = logging.getLogger("terminus.bench.peer")

SESSION_MAXLEN: Final = 10_000
POLLING_MS: Final = 100  # FastStream's XREADGROUP BLOCK while a stream is empty
READ_COUNT: Final = 512  # entries per XREADGROUP, as the workers' batch size


def build(url: str, prefix: str, partitions: int) -> FastStream:
    """The app: one stream subscriber per partition, all in one process."""
    # Per-message log lines at DEBUG: at INFO, FastStream's default, they cost more than the fold.
    broker = RedisBroker(url, log_level=logging.DEBUG)
    turns: dict[str, Turn] = {}
    clients: list[Redis] = []  # the one the frames are written with, from the app's start

    async def handle(body: Any) -> None:
        try:
            event = decode_event(body[FIELD.decode()] if isinstance(body, dict) else b"")
            out = Outputs()
            turns[event.turn_id], _ = evolve(turns.get(event.turn_id), event, DEFAULT_CONFIG, out)
        except (CodecError, CoreError) as exc:
            log.warning("peer: %s", exc)
            return
        if out.frames:
            pipe = clients[0].pipeline(transaction=False)
            for frame in out.frames:
                keys = keys_for_session(frame.session_id, partitions, prefix)
                pipe.xadd(
                    keys.session(frame.session_id),
                    {FIELD: encode_json(frame)},
                    maxlen=SESSION_MAXLEN,
                )
            await pipe.execute()

    for partition in range(partitions):
        stream = StreamSub(
            Keys(partition, prefix).inbound,
            group=GROUP,
            consumer="peer",
            polling_interval=POLLING_MS,
            max_records=READ_COUNT,
        )
        broker.subscriber(stream=stream)(handle)
    app = FastStream(broker)

    @app.on_startup
    async def read_from_the_start() -> None:
        """The group from the log's first entry, as the workers' (FastStream's starts at `$`)."""
        client = Redis.from_url(url)
        clients.append(client)
        for partition in range(partitions):
            with contextlib.suppress(ResponseError):  # BUSYGROUP: it exists already
                await client.xgroup_create(
                    Keys(partition, prefix).inbound, GROUP, "0", mkstream=True
                )

    @app.after_shutdown
    async def close() -> None:
        for client in clients:
            await client.aclose()

    return app
