"""What Redis spends on a light-load round that commits: `python -m bench.e2e.commit_cost`.

At 1,000 events/s a round commits two or three owners' batches of one to three entries each and
probes the rest (docs/performance.md). End to end, the same code moves by a third between runs on
the 2-core benchmark machine; the server's own time per command (INFO commandstats) moves much
less. This plays such rounds: `--busy` owners each commit a batch of `--entries` workload events
folded as a worker folds them (and read their next), and the other owners of `--owners` are
probed. It prints, per round, the server's µs in round.lua (EVALSHA), in the commands the script
ran, and the rest: the script's own work (Lua, its MessagePack, its replies). The setup between
rounds (publishing, the fenced read that makes entries pending) is not counted. On a private
redis-server, as `bench.e2e`'s, unless `--redis-url` names one (INFO must be allowed there).
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Iterator
from typing import Any, Final

from redis.asyncio import Redis

from bench.common.procs import run_on_redis
from bench.common.redis_ops import delete_prefix, server_usage
from bench.common.workload import encode as encode_events
from bench.common.workload import generate
from terminus.service.fold.applier import PartitionFold, Timeouts, decode_entries, read_entries
from terminus.service.fold.commit import Value, encode
from terminus.service.keys import FIELD, GROUP, Keys
from terminus.service.redis.replies import text
from terminus.service.redis.scripts import script
from terminus.service.runtime.wire import Call, Probe, bundle, unbundle
from terminus.service.settings import Settings

LEASE: Final = "bench:1"
CONSUMER: Final = "bench"
# What the server ran that the script did not: the call itself, the bench's INFO, a first load.
SKIPPED: Final = frozenset({"evalsha", "info", "script|load"})


class Owner:
    """One busy owner: its log, its fold, and the workload it publishes from."""

    def __init__(self, keys: Keys, settings: Settings, seed: int) -> None:
        self.keys = keys
        self.settings = settings
        timeouts = Timeouts(settings.stall_timeout_ms, settings.tool_timeout_ms)
        self.fold = PartitionFold(keys, settings.core(), timeouts, settings.session_maxlen)
        self.events = iter(encode_events(generate(seed, 200, 40)))
        self.seen = ""

    async def next_call(self, redis: Redis, entries: int) -> Call:
        """Publish `entries` events, read them as the owner reads (pending for it), fold them:
        the commit (and the read of the next) a round would send."""
        for raw in _take(self.events, entries):
            await redis.xadd(self.keys.inbound, {FIELD: raw})
        fence: list[Value] = [LEASE, GROUP, CONSUMER, entries]
        ids, payloads, _ = await script(redis, "read")(
            keys=[self.keys.lease, self.keys.inbound], args=fence
        )
        read = read_entries(ids, payloads)
        if len(read) != entries:
            raise RuntimeError(f"read {len(read)} entries, not {entries}")
        self.seen = read[-1].id
        batch, _ = self.fold.apply(decode_entries(read, self.settings.max_deliveries))
        names, args = encode(batch, self.keys, LEASE, CONSUMER, self.settings.batch_size, self.seen)
        return "commit", names, args

    def committed(self, reply: Any) -> None:
        if not isinstance(reply, list):
            raise RuntimeError(f"the commit was refused: {reply!r:.200}")
        self.fold.settle()


def _take(events: Iterator[bytes], n: int) -> list[bytes]:
    taken = [raw for _, raw in zip(range(n), events, strict=False)]
    if len(taken) < n:
        raise RuntimeError("the workload ran out: fewer --rounds")
    return taken


async def measure(redis: Redis, args: argparse.Namespace, prefix: str = "") -> dict[str, float]:
    """Per round, the server's µs in round.lua and in what it ran (printed too); the keys under
    `prefix` (default: a new one), deleted."""
    prefix = prefix or f"bench-cc-{uuid.uuid4().hex[:8]}"
    settings = Settings(prefix=prefix)
    busy: list[Owner] = []
    probes: list[Probe] = []
    for p in range(args.owners):
        keys = Keys(p, prefix)
        await redis.xgroup_create(keys.inbound, GROUP, id="0-0", mkstream=True)
        await redis.set(keys.lease, LEASE)
        if p < args.busy:
            busy.append(Owner(keys, settings, seed=p + 1))
        else:
            last = text(await redis.xadd(keys.inbound, {FIELD: b"x" * 170}))
            await script(redis, "read")(
                keys=[keys.lease, keys.inbound], args=[LEASE, GROUP, CONSUMER, 512]
            )
            probes.append(Probe(keys.lease, keys.inbound, LEASE, CONSUMER, last))
    spent: dict[str, float] = {}
    try:
        for _ in range(args.rounds):
            calls = [await owner.next_call(redis, args.entries) for owner in busy]
            name, round_keys, argv = bundle(calls, probes, settings.batch_size)
            before = await server_usage(redis)
            replies = await script(redis, name)(keys=round_keys, args=argv)
            used = (await server_usage(redis)).minus(before).commands
            each, read = unbundle([replies], len(calls))
            if read:
                raise RuntimeError(f"an idle owner's log grew: {read!r:.200}")
            for owner, reply in zip(busy, each, strict=True):
                owner.committed(reply)
            for command, (_, usec) in used.items():
                spent[command] = spent.get(command, 0.0) + usec
    finally:
        await delete_prefix(redis, prefix)
    per_round = {command: usec / args.rounds for command, usec in spent.items() if usec}
    inner = sum(usec for command, usec in per_round.items() if command not in SKIPPED)
    figures = {
        "round_us": per_round.get("evalsha", 0.0),
        "commands_us": inner,
        "script_own_us": per_round.get("evalsha", 0.0) - inner,
    }
    for figure, usec in figures.items():
        print(f"{figure:<16}{usec:>8.1f} µs of Redis per round")
    detail = sorted(
        ((c, u) for c, u in per_round.items() if c not in SKIPPED), key=lambda cu: -cu[1]
    )
    print("  " + ", ".join(f"{c} {u:.1f}" for c, u in detail))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e.commit_cost", description=__doc__)
    parser.add_argument("--redis-url", help="use this Redis, not a private one")
    parser.add_argument("--owners", type=int, default=16, help="owners of the pump")
    parser.add_argument("--busy", type=int, default=2, help="owners that commit each round")
    parser.add_argument("--entries", type=int, default=3, help="entries of each commit")
    parser.add_argument("--rounds", type=int, default=1000)
    args = parser.parse_args()
    run_on_redis(args.redis_url, lambda redis: _report(redis, args))


async def _report(redis: Redis, args: argparse.Namespace) -> None:
    await measure(redis, args)


if __name__ == "__main__":
    main()
