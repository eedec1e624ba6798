"""What a paced round's round trip costs the worker, by path: `python -m bench.e2e.round_trip`.

At light load a round carries a few entries and costs mostly its round trip. This times the
skeleton of one, `--rounds` times at `--every` ms (the linger): a timer, then one round that
probes `--owners` idle owners (one call of round.lua, which reads none: no log grew), sent by the
pump's `Wire` through redis-py's `Pipeline` and on its own connection (service/runtime/line.py).
It prints the process CPU per round of each, the timer alone first, as the floor they share; the
runs alternate, so that a machine whose speed drifts shows it. On a private redis-server, as
`bench.e2e`'s, unless `--redis-url` names one.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis

from bench.common.procs import run_on_redis
from bench.common.redis_ops import delete_prefix
from terminus.service.keys import GROUP, START, Keys
from terminus.service.redis.scripts import source
from terminus.service.runtime.wire import Call, Probe, Wire
from terminus.service.settings import Settings

Round = Callable[[], Awaitable[Any]]


async def measure(redis: Redis, args: argparse.Namespace, prefix: str = "") -> None:
    """Print each path's CPU per round; its keys under `prefix` (default: a new one), deleted.
    Both paths are the pump's own (`Wire.send`), with and without its own connection."""
    prefix = prefix or f"bench-rt-{uuid.uuid4().hex[:8]}"
    keys = [Keys(p, prefix) for p in range(args.owners)]
    for k in keys:
        await redis.xgroup_create(k.inbound, GROUP, id="0-0", mkstream=True)
        await redis.set(k.lease, "bench:1")
    await redis.script_load(source("round"))
    idle = [Probe(k.lease, k.inbound, "bench:1", "bench", START) for k in keys]
    calls: list[Call] = []
    piped = Wire(redis, Settings(), own_connection=False)
    own = Wire(redis, Settings())
    paths: dict[str, Round] = {
        "timer alone": _nothing,
        "redis-py Pipeline": lambda: piped.send(calls, idle),
        "own connection (Line)": lambda: own.send(calls, idle),
    }
    try:
        for run in range(args.runs):
            for label, path in paths.items():
                cpu = await _per_round(path, args.rounds, args.every / 1000)
                print(f"run {run + 1}  {label:<24}{cpu:>7.0f} µs of CPU per round")
    finally:
        await own.close()
        await delete_prefix(redis, prefix)


async def _per_round(path: Round, rounds: int, every_s: float) -> float:
    loop = asyncio.get_running_loop()
    started = time.process_time()
    for _ in range(rounds):
        paced: asyncio.Future[None] = loop.create_future()
        loop.call_later(every_s, paced.set_result, None)  # the pump's pace: a bare future
        await paced
        await path()
    return (time.process_time() - started) / rounds * 1e6


async def _nothing() -> None:
    return None


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e.round_trip", description=__doc__)
    parser.add_argument("--redis-url", help="use this Redis, not a private one")
    parser.add_argument("--owners", type=int, default=8, help="idle owners read per round")
    parser.add_argument("--rounds", type=int, default=2500)
    parser.add_argument("--every", type=float, default=2.0, help="ms between rounds")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    run_on_redis(args.redis_url, lambda redis: measure(redis, args))


if __name__ == "__main__":
    main()
