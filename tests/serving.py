"""What a test runs beside itself, in its own event loop: the gateway (any ASGI app) on uvicorn on a
free loopback port, and a worker, so the test, a worker and the server share one process."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import uvicorn
from redis.asyncio import Redis
from starlette.types import ASGIApp

from terminus.service.redis.embedded import free_port
from terminus.service.runtime.worker import Worker
from terminus.service.settings import Settings


@contextlib.asynccontextmanager
async def serving(app: ASGIApp) -> AsyncIterator[str]:
    """Serve `app` until the block ends; yields its base URL. Open streams are cut after 1 s of
    shutdown, as a client that stays connected must not hold the test."""
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    served = asyncio.create_task(server.serve())
    while not server.started:
        if served.done():
            await served  # it failed to start: raise its error
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await served


@contextlib.asynccontextmanager
async def running_worker(redis: Redis, settings: Settings) -> AsyncIterator[Worker]:
    """One in-process worker on `settings`, stopped when the block ends."""
    worker = Worker(redis, settings)
    task = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        await worker.stop()
        await task
