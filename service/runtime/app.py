"""The worker process as a FastStream application (DESIGN section 5).

FastStream is the shell: the broker's connection (socket timeouts above the block time, TCP
keepalive, health checks), lifespan, the control subscriber and the AsyncAPI description of
the streams. The hot loop does not go through per-message subscribers: it reads and commits
whole batches with Lua scripts on the broker's own redis-py client
(`terminus.service.runtime.owner`).

    faststream run terminus.service.runtime.app:app          # or: terminus worker
    faststream docs gen terminus.service.runtime.app:app     # AsyncAPI of the streams
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
from typing import Any

from faststream import FastStream
from faststream.redis import RedisBroker, StreamSub

from terminus.events.inbound import InboundEvent
from terminus.events.outbound import ProducerCommand, SessionUpdate
from terminus.service.keys import Keys, control_channel
from terminus.service.redis.connect import make_broker
from terminus.service.runtime import logs
from terminus.service.runtime.worker import Worker
from terminus.service.settings import Settings, from_env
from terminus.service.shape import settled

log = logging.getLogger("terminus.app")


def tune_gc() -> None:
    """Fewer, later collections: a batch allocates many short-lived objects and few cycles.

    Measured on the worker: the default thresholds spent about 16% of its CPU in the collector.
    Objects alive at startup (modules, the Machine) are frozen out of every later collection.
    """
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)


def create_app(settings: Settings | None = None) -> FastStream:
    """One worker: joins the pool on startup, leaves it (leases released) on shutdown."""
    settings = settings or from_env(os.environ)
    broker = make_broker(settings)
    app = FastStream(broker, logger=log)
    running: dict[str, Any] = {}
    _document_streams(broker, settings)

    @broker.subscriber(control_channel(settings.prefix), title="control")
    async def on_control(body: str) -> None:
        """A worker joined or released partitions: rebalance now."""
        worker = running.get("worker")
        if isinstance(worker, Worker) and body != worker.worker_id:
            worker.nudge()

    @app.after_startup
    async def start() -> None:
        logs.configure(settings.log_format, logs.level_of(settings.log_level))
        tune_gc()
        redis = (
            await broker.connect()
        )  # a RedisCluster on a cluster: see terminus.service.redis.connect
        # The pool's shape: recorded by its first worker, agreed with by every later one.
        shaped = await settled(redis, settings, by="pool")
        worker = Worker(redis, shaped)
        running["worker"] = worker
        running["task"] = asyncio.create_task(worker.run(), name="worker")
        log.info("worker %s started on %d partitions", worker.worker_id, shaped.partitions)

    @app.on_shutdown
    async def stop() -> None:
        worker, task = running.get("worker"), running.get("task")
        if isinstance(worker, Worker):
            await worker.stop()
        if isinstance(task, asyncio.Task):
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    return app


def _document_streams(broker: RedisBroker, settings: Settings) -> None:
    """Publishers that exist for the AsyncAPI document: what flows on which stream."""
    sample = Keys(0, settings.prefix)
    pattern = sample.root.replace("{0}", "{p}")
    for stream, schema, text in (
        (sample.inbound, InboundEvent, "inbound events, appended by producers (field `e`)"),
        (sample.session("<sid>"), SessionUpdate, "session updates for frontends (field `e`)"),
        (sample.commands, ProducerCommand, "what producers act on (docs/producers.md)"),
    ):
        broker.publisher(
            stream=StreamSub(stream.replace(sample.root, pattern)),
            title=stream.replace(sample.root, pattern),
            description=text,
            schema=schema,
        )


app = create_app()
