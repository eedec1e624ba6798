"""One batch through the fold: load the turns it lacks, apply it, commit, settle.

The worker's drain (service/runtime/owner.py) and `terminus replay` run a batch through here.
The pump runs the same steps for all its owners at once, to pipeline their loads and commits
(service/runtime/pump.py), through the owner's steps rather than another copy of them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from redis.asyncio import Redis

from terminus.service.fold.applier import BatchStats, Decoded, PartitionFold, load_turns
from terminus.service.fold.commit import Batch

Commit = Callable[[Batch], Awaitable[object]]


async def fold_and_commit(
    redis: Redis, fold: PartitionFold, decoded: list[Decoded], commit: Commit
) -> BatchStats:
    """Fold `decoded` and hand the batch to `commit`; the fold settles only once it returns.
    If a step raises, the fold forgets what it held (memory would run ahead of Redis)."""
    try:
        await load_turns(redis, fold, fold.missing(decoded))
        batch, stats = fold.apply(decoded)
        await commit(batch)
    except BaseException:
        fold.forget()
        raise
    fold.settle()
    return stats
