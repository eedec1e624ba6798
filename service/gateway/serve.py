"""Serve the HTTP gateway with uvicorn on one Redis client, until SIGINT/SIGTERM."""

from __future__ import annotations

import logging

import uvicorn

from terminus.service.gateway.routes import create_gateway
from terminus.service.gateway.tokens import Keyring
from terminus.service.redaction import RedactTokens
from terminus.service.redis.connect import make_broker
from terminus.service.settings import Settings


async def serve_gateway(settings: Settings, secret: bytes | Keyring, host: str, port: int) -> None:
    """Connect (with the workers' client options: timeouts, keepalive), then serve."""
    broker = make_broker(settings, client_name="terminus-gateway")
    redis = (
        await broker.connect()
    )  # a RedisCluster on a cluster: see terminus.service.redis.connect
    try:
        app = create_gateway(redis, settings, secret)
        level = settings.log_level
        config = uvicorn.Config(app, host=host, port=port, log_level=level, lifespan="off")
        # After Config (which configures uvicorn's loggers): a request line's `token=` is masked.
        logging.getLogger("uvicorn.access").addFilter(RedactTokens())
        await uvicorn.Server(config).serve()
    finally:
        await broker.stop()
