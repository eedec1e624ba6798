"""`python -m bench.floor`: the floor consumer (bench/floor/__init__.py) until SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from redis.asyncio import Redis

from bench.floor.consumer import DEFAULT_LINGER_MS, Floor
from terminus.service.cli.loop import run


async def main() -> None:
    redis = Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    floor = Floor(
        redis,
        os.environ.get("TERMINUS_PREFIX", "terminus"),
        int(os.environ.get("TERMINUS_PARTITIONS", "16")),
        int(os.environ.get("TERMINUS_BATCH_SIZE", "512")),
    )
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()

    def stop() -> None:
        floor.stopping = True
        if task is not None:
            task.cancel()

    loop.add_signal_handler(signal.SIGTERM, stop)
    loop.add_signal_handler(signal.SIGINT, stop)
    # BENCH_FLOOR_LINGER_MS sets the floor's alone: --worker-env reaches every process of a run.
    chosen = os.environ.get("BENCH_FLOOR_LINGER_MS") or os.environ.get("TERMINUS_LINGER_MS")
    linger_ms = float(chosen or DEFAULT_LINGER_MS)
    await floor.start()
    with contextlib.suppress(asyncio.CancelledError):
        await floor.loop(linger_ms / 1000)
    await floor.line.close()
    await redis.aclose()


if __name__ == "__main__":
    run(main())
