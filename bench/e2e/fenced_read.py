"""What the fence costs Redis on a read of a full batch: `python -m bench.e2e.fenced_read`.

An owner reads its batch inside a script that checks its lease first (read.lua): a plain
XREADGROUP of a worker whose lease went would move entries behind the new owner's back (docs/
design.md, "Reads are fenced too"). Inside a script the reply is converted into Lua tables,
reshaped, and converted back. This reads a log of `--batches` batches of `--count` entries of the
workload's size, once with plain XREADGROUPs and once through read.lua, each in its own consumer
group, alternating `--runs` times, and prints the server's time per entry of each (INFO
commandstats). On a private redis-server, as `bench.e2e`'s, unless `--redis-url` names one (INFO
must be allowed there).
"""

from __future__ import annotations

import argparse
import uuid
from typing import Any

from redis.asyncio import Redis

from bench.common.procs import run_on_redis
from bench.common.redis_ops import delete_prefix, server_usage
from terminus.service.keys import FIELD, Keys
from terminus.service.redis.scripts import script

LEASE = "bench:1"
WAYS = ("plain XREADGROUP", "through read.lua")


async def measure(redis: Redis, args: argparse.Namespace, prefix: str = "") -> dict[str, float]:
    """Each way's least server µs per entry (printed too); its keys under `prefix` (default: a
    new one), deleted."""
    prefix = prefix or f"bench-fr-{uuid.uuid4().hex[:8]}"
    keys = Keys(0, prefix)
    await redis.set(keys.lease, LEASE)
    for _ in range(args.batches):
        async with redis.pipeline(transaction=False) as pipe:
            for _ in range(args.count):
                pipe.xadd(keys.inbound, {FIELD: b"x" * 170})
            await pipe.execute()
    best = dict.fromkeys(WAYS, float("inf"))
    read = script(redis, "read")
    try:
        for run in range(args.runs):
            for way in WAYS:
                group = f"{way[:5]}-{run}"
                await redis.xgroup_create(keys.inbound, group, id="0-0")
                command = "xreadgroup" if way == WAYS[0] else "evalsha"
                before = await server_usage(redis)
                entries = 0
                for _ in range(args.batches):
                    if way == WAYS[0]:
                        reply: Any = await redis.xreadgroup(
                            group, "bench", {keys.inbound: ">"}, count=args.count
                        )
                        entries += len(reply[0][1]) if reply else 0  # [[stream, entries]]
                    else:
                        fence = [LEASE, group, "bench", args.count]
                        ids, _, _ = await read(keys=[keys.lease, keys.inbound], args=fence)
                        entries += len(ids)
                if entries != args.batches * args.count:
                    raise RuntimeError(f"{way} read {entries} entries, not the whole log")
                per_entry = (await server_usage(redis)).minus(before).usec(command) / entries
                best[way] = min(best[way], per_entry)
                print(f"run {run + 1}  {way:<18}{per_entry:>6.2f} µs of Redis per entry")
    finally:
        await delete_prefix(redis, prefix)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e.fenced_read", description=__doc__)
    parser.add_argument("--redis-url", help="use this Redis, not a private one")
    parser.add_argument("--count", type=int, default=512, help="entries per read (batch size)")
    parser.add_argument("--batches", type=int, default=100, help="reads each way, per run")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    run_on_redis(args.redis_url, lambda redis: _report(redis, args))


async def _report(redis: Redis, args: argparse.Namespace) -> None:
    best = await measure(redis, args)
    plain, fenced = (best[way] for way in WAYS)
    print(f"least of {args.runs}: {fenced:.2f} against {plain:.2f} µs per entry")


if __name__ == "__main__":
    main()
