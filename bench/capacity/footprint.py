"""What a run left in Redis, by kind of key, per provider token and per turn.

Weighed once the worker is stopped and before the keys go (`realistic_phase`'s `then`), with
MEMORY USAGE SAMPLES 0 (every element, not an estimate) over every key of the prefix, grouped
by kind as bench/soak/verify.py groups them (`in`, `session`, `turn`, `messages`...). The keys
hold what the prelude published too, so its tokens and turns are counted with the schedule's.
"""

from __future__ import annotations

from typing import NamedTuple

from redis.asyncio import Redis

from bench.e2e.schedule import Schedule
from bench.soak.verify import memory_by_kind


class Footprint(NamedTuple):
    """Bytes by kind of key, and the provider tokens and turns that wrote them."""

    bytes_by_kind: dict[str, int]
    keys_by_kind: dict[str, int]
    tokens: int
    turns: int

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes_by_kind.values())

    def per_token(self) -> dict[str, float]:
        return {kind: b / self.tokens for kind, b in self.bytes_by_kind.items()}

    def per_turn(self) -> dict[str, float]:
        return {kind: b / self.turns for kind, b in self.bytes_by_kind.items()}


def written(schedule: Schedule) -> tuple[int, int]:
    """Provider tokens and turns a schedule publishes, prelude included, however many tokens
    each of its deltas carries."""
    turns = {e.turn_id for e in schedule.prelude} | {e.turn_id for e in schedule.events}
    return schedule.tokens + schedule.prelude_tokens, len(turns)


async def weigh(redis: Redis, prefix: str, schedule: Schedule) -> Footprint:
    """The footprint of `prefix`, written by `schedule`."""
    kinds = await memory_by_kind(redis, prefix, samples=0)
    tokens, turns = written(schedule)
    return Footprint(
        {kind: v["bytes"] for kind, v in kinds.items()},
        {kind: v["keys"] for kind, v in kinds.items()},
        tokens,
        turns,
    )
