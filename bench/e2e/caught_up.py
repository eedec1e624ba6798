"""What Redis spends on a round of caught-up owners' reads: `python -m bench.e2e.caught_up`.

At light load most owners of a round have nothing to read. A round probes them (service/runtime/
wire.py, `Probe`): one XREAD over their logs, inside the script, after the last entry each read in
its epoch, and a read only of those that grew. Before probes each was a read call of its own,
told that last entry, which first asked whether any entry follows it (an empty XRANGE); and
before that, the fenced read (GET of the lease, XREADGROUP, XREVRANGE of the tail). This sends
one call of round.lua over `--owners` caught-up owners `--calls` times each way, alternating
`--runs` times, and prints the server's time per call of each (INFO commandstats, EVALSHA); the
least of each way is its figure. On a private redis-server, as
`bench.e2e`'s, unless `--redis-url` names one (INFO must be allowed there).
"""

from __future__ import annotations

import argparse
import uuid

from redis.asyncio import Redis

from bench.common.procs import run_on_redis
from bench.common.redis_ops import delete_prefix, server_usage
from terminus.service.fold.commit import Value
from terminus.service.keys import FIELD, GROUP, Keys
from terminus.service.redis.replies import text
from terminus.service.redis.scripts import script
from terminus.service.runtime.wire import Call, Probe, bundle

LEASE = "bench:1"
WAYS = ("probed", "told where the log ends", "the fenced read")


async def measure(redis: Redis, args: argparse.Namespace, prefix: str = "") -> dict[str, float]:
    """Each way's least server µs per round (printed too); its keys under `prefix` (default: a
    new one), deleted."""
    prefix = prefix or f"bench-cu-{uuid.uuid4().hex[:8]}"
    told: list[Call] = []
    probes: list[Probe] = []
    for p in range(args.owners):
        owner = Keys(p, prefix)
        await redis.xgroup_create(owner.inbound, GROUP, id="0-0", mkstream=True)
        await redis.set(owner.lease, LEASE)
        # One entry of the workload's size, read: the owner is caught up.
        last = text(await redis.xadd(owner.inbound, {FIELD: b"x" * 170}))
        fence: list[Value] = [LEASE, GROUP, "bench", 512]
        await script(redis, "read")(keys=[owner.lease, owner.inbound], args=fence)
        told.append(("read", [owner.lease, owner.inbound], [*fence, last]))
        probes.append(Probe(owner.lease, owner.inbound, LEASE, "bench", last))
    fenced: list[Call] = [(name, keys, args[:4]) for name, keys, args in told]
    rounds = [bundle([], probes, 512), bundle(told), bundle(fenced)]
    best = dict.fromkeys(WAYS, float("inf"))
    try:
        for run in range(args.runs):
            for way, (name, keys, argv) in zip(WAYS, rounds, strict=True):
                call = script(redis, name)
                before = await server_usage(redis)
                for _ in range(args.calls):
                    replies, hits = await call(keys=keys, args=argv)
                if hits or any(not isinstance(r, list) or r[0] for r in replies):  # read, refused
                    raise RuntimeError(f"{way}: not every owner was caught up: {replies!r:.200}")
                calls, usec = (await server_usage(redis)).minus(before).commands["evalsha"]
                per_round = usec / calls
                best[way] = min(best[way], per_round)
                print(f"run {run + 1}  {way:<24}{per_round:>7.1f} µs of Redis per round")
    finally:
        await delete_prefix(redis, prefix)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e.caught_up", description=__doc__)
    parser.add_argument("--redis-url", help="use this Redis, not a private one")
    parser.add_argument("--owners", type=int, default=16, help="caught-up owners read per round")
    parser.add_argument("--calls", type=int, default=2000, help="rounds each way, per run")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    run_on_redis(args.redis_url, lambda redis: _report(redis, args))


async def _report(redis: Redis, args: argparse.Namespace) -> None:
    best = await measure(redis, args)
    probed, told, fenced = (best[way] for way in WAYS)
    print(
        f"least of {args.runs}: probed {probed:.1f}, told {told:.1f}, fenced {fenced:.1f} µs "
        f"({probed / told:.2f}x told, {probed / fenced:.2f}x fenced)"
    )


if __name__ == "__main__":
    main()
