"""The gateway served as `terminus gateway` serves it (`server_config`) runs its lifespan: the
hub's close hook runs on shutdown, so its Redis readers stop before the client closes.

Issue 31, item 7: uvicorn ran with `lifespan="off"`, and the hub was never closed.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
import uvicorn
from redis.asyncio import Redis

from terminus.service.gateway import hub as hub_module
from terminus.service.gateway.routes import create_gateway
from terminus.service.gateway.serve import server_config
from terminus.service.redis.embedded import free_port
from terminus.service.settings import Settings

SECRET = b"lifespan-test-secret-0123456789"


async def test_the_hub_is_closed_when_the_gateway_shuts_down(
    redis: Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed: list[hub_module.Hub] = []
    original = hub_module.Hub.close

    async def close(self: hub_module.Hub) -> None:
        closed.append(self)
        await original(self)

    monkeypatch.setattr(hub_module.Hub, "close", close)
    await _serve_and_stop(redis, prefix)
    assert len(closed) == 1


async def _serve_and_stop(redis: Redis, prefix: str) -> None:
    port = free_port()
    app = create_gateway(redis, Settings(prefix=prefix), SECRET)
    server = uvicorn.Server(server_config(app, Settings(log_level="warning"), "127.0.0.1", port))
    task = asyncio.create_task(server.serve())
    while not server.started:
        assert not task.done(), task.result()
        await asyncio.sleep(0.01)
    async with httpx.AsyncClient() as client:
        assert (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200
    server.should_exit = True
    await asyncio.wait_for(task, 10)
