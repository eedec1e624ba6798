"""Serve the HTTP gateway with uvicorn on one Redis client, until SIGINT/SIGTERM.

The server's own bounds (docs/security.md, "Bounds of the gateway"): a request's head may be
`http_max_head_bytes` long and must arrive within `http_head_timeout_s` (service/gateway/heads.py);
a connection idle between requests is closed after `http_idle_timeout_s` (uvicorn's keep-alive
timer); bodies are refused unread (service/gateway/bodies.py); WebSocket upgrades are not served.

uvicorn runs the app's lifespan: on shutdown the hub's readers are cancelled and awaited
(service/gateway/routes.py), before the Redis client they read with is closed.
"""

from __future__ import annotations

import logging

import uvicorn
from starlette.types import ASGIApp

from terminus.service.gateway.heads import HeadBounds, bounded_protocol
from terminus.service.gateway.routes import create_gateway
from terminus.service.gateway.tokens import Keyring
from terminus.service.redaction import RedactTokens
from terminus.service.redis.connect import make_broker
from terminus.service.settings import Settings
from terminus.service.shape import settled


async def serve_gateway(settings: Settings, secret: bytes | Keyring, host: str, port: int) -> None:
    """Connect (with the workers' client options: timeouts, keepalive), agree with the
    deployment's recorded shape (`ShapeMismatch` before serving anything), then serve."""
    broker = make_broker(settings, client_name="terminus-gateway")
    redis = (
        await broker.connect()
    )  # a RedisCluster on a cluster: see terminus.service.redis.connect
    try:
        settings = await settled(redis, settings)
        app = create_gateway(redis, settings, secret)
        config = server_config(app, settings, host, port)
        # After Config (which configures uvicorn's loggers): a request line's `token=` is masked.
        logging.getLogger("uvicorn.access").addFilter(RedactTokens())
        await uvicorn.Server(config).serve()
    finally:
        await broker.stop()


def server_config(app: ASGIApp, settings: Settings, host: str, port: int) -> uvicorn.Config:
    """uvicorn's configuration for the gateway, with the server bounds of `settings`."""
    bounds = HeadBounds(
        max_head_bytes=settings.http_max_head_bytes, head_timeout_s=settings.http_head_timeout_s
    )
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=settings.log_level,
        lifespan="on",  # the app's lifespan closes the hub (routes.py)
        http=bounded_protocol(bounds),
        ws="none",
        timeout_keep_alive=settings.http_idle_timeout_s,
    )
