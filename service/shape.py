"""The deployment's shape, recorded once in Redis, so that producers, workers, the gateway and
every command agree on it (DESIGN section 1, docs/design.md "The deployment's shape").

Why: a session's partition is `crc32(session) % P`. A producer and a pool that disagree on P
route one session to different streams: the producer's XADD succeeds, no worker ever reads the
entry, and frontends see nothing, with no error anywhere. So the first writer, the pool or a
producer, records P, the key prefix and the contract version at `<prefix>:shape`
(service/keys.py; one Lua check-then-write, service/redis/lua/shape.lua), and every process
reads it when it starts:

- a count that was set (`TERMINUS_PARTITIONS`, `Producer(partitions=)`, `partitions=` of an SDK
  reader) and disagrees with the record is one `ShapeMismatch`, naming what to set;
- a count that was not set follows the record; with nothing recorded it is the environment's
  `TERMINUS_PARTITIONS`, else 16, and a writer records it: entries routed by a count fix it;
- a worker raises the recorded contract version to its own; a producer writing a newer contract
  than the recorded one is refused (`ContractAhead`): workers are upgraded before producers.

Readers (the gateway, the SDK's views and sources, read-only commands) never record.

Errors:
    ShapeError (TerminusError)
     +-- ShapeMismatch (ValueError)   a set partition count disagrees with the recorded one
     +-- ContractAhead                a producer writes a newer contract than the pool reads
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final, Literal

import msgspec
from redis.asyncio import Redis

from terminus.events.versions import CURRENT
from terminus.service import TerminusError
from terminus.service.keys import shape_key
from terminus.service.redis.replies import text

if TYPE_CHECKING:  # the settings load the core's config and policies, which a frontend needs not
    from terminus.service.settings import Settings

log = logging.getLogger("terminus.shape")

DEFAULT_PARTITIONS: Final = 16
VARIABLE: Final = "TERMINUS_PARTITIONS"
FIELDS: Final = ("partitions", "prefix", "contract", "by")

Writer = Literal["pool", "producer"]
# How a count was set, so that the error names the setting to change.
Source = Literal["env", "argument"]


class Shape(msgspec.Struct, frozen=True, kw_only=True):
    """What the deployment recorded: its partition count, key prefix and contract version, and
    who recorded it first (`pool` or `producer`)."""

    partitions: int
    prefix: str
    contract: int
    by: str


class ShapeError(TerminusError):
    """The process cannot work with this deployment's recorded shape; the message says why."""


class ShapeMismatch(ShapeError, ValueError):
    """A partition count that was set disagrees with the recorded one; says what to set."""

    def __init__(self, shape: Shape, configured: int, source: Source) -> None:
        fix = (
            f"set {VARIABLE}={shape.partitions}, or leave it unset"
            if source == "env"
            else f"pass partitions={shape.partitions}, or drop partitions={configured}"
        )
        super().__init__(
            f"this deployment has {shape.partitions} partitions (recorded by the {shape.by} at "
            f"{shape_key(shape.prefix)}), not {configured}: {fix}"
        )
        self.shape, self.configured = shape, configured


class ContractAhead(ShapeError):
    """The producer writes a newer event contract than the deployment's workers read."""

    def __init__(self, shape: Shape) -> None:
        super().__init__(
            f"this producer writes event contract version {CURRENT}, the workers of this "
            f"deployment read up to {shape.contract} ({shape_key(shape.prefix)}): "
            "upgrade the workers before the producers"
        )
        self.shape = shape


# Recorded shapes, per client and prefix: a recorded count never changes (docs/design.md), so
# each process reads it once. "Nothing recorded" is never kept: a pool may record it any time.
_known: weakref.WeakKeyDictionary[Redis, dict[str, Shape]] = weakref.WeakKeyDictionary()


async def recorded(redis: Redis, prefix: str, *, fresh: bool = False) -> Shape | None:
    """The shape recorded under `prefix`, or None if nothing is recorded yet."""
    known = _known.get(redis, {}).get(prefix)
    if known is not None and not fresh:
        return known
    values = await redis.hmget(shape_key(prefix), list(FIELDS))
    return None if values[0] is None else _remember(redis, prefix, values)


async def record(redis: Redis, prefix: str, partitions: int, by: Writer) -> Shape:
    """The recorded shape, recording `partitions` first if nothing is; a pool also raises the
    recorded contract version to its own."""
    # Imported here: only a writer (the pool, a producer) records, and a frontend that reads
    # the shape must not load the scripts (tests/unit/test_sdk_weight.py).
    from terminus.service.redis.scripts import script

    values = await script(redis, "shape")(
        keys=[shape_key(prefix)], args=[partitions, prefix, CURRENT, by]
    )
    return _remember(redis, prefix, values)


def configured(
    partitions: int | None, env: Mapping[str, str] = os.environ
) -> tuple[int | None, Source]:
    """The count an SDK caller set: its argument, else `TERMINUS_PARTITIONS`, else None."""
    if partitions is not None:
        return partitions, "argument"
    if env.get(VARIABLE, "").strip():
        from terminus.service.settings import from_env  # see the TYPE_CHECKING import above

        return from_env({VARIABLE: env[VARIABLE]}).partitions, "env"
    return None, "env"


async def partitions_of(
    redis: Redis,
    prefix: str,
    partitions: int | None,
    *,
    source: Source,
    by: Writer | None = None,
    fallback: int = DEFAULT_PARTITIONS,
) -> int:
    """The deployment's partition count: the recorded one, else `partitions` (else `fallback`),
    which a writer (`by`) records. Raises `ShapeMismatch` if `partitions` disagrees with the
    record, `ContractAhead` for a producer ahead of the workers."""
    wanted = partitions or fallback
    shape = await (record(redis, prefix, wanted, by) if by == "pool" else recorded(redis, prefix))
    if shape is None and by == "producer":
        shape = await record(redis, prefix, wanted, by)
    if shape is None:
        return wanted
    if by is not None:
        shape = await _contract_checked(redis, shape, by)
    if partitions is not None and partitions != shape.partitions:
        raise ShapeMismatch(shape, partitions, source)
    return shape.partitions


async def settled(redis: Redis, settings: Settings, by: Writer | None = None) -> Settings:
    """`settings` with the deployment's partition count: `TERMINUS_PARTITIONS` must agree with
    the recorded one (`ShapeMismatch`), and is followed when unset (`partitions_given`)."""
    given = settings.partitions if settings.partitions_given else None
    partitions = await partitions_of(
        redis, settings.prefix, given, source="env", by=by, fallback=settings.partitions
    )
    if partitions == settings.partitions:
        return settings
    return msgspec.structs.replace(settings, partitions=partitions)


async def _contract_checked(redis: Redis, shape: Shape, by: Writer) -> Shape:
    if by == "producer" and shape.contract < CURRENT:
        # A pool upgraded since this process read the shape raised it: ask Redis again.
        shape = await recorded(redis, shape.prefix, fresh=True) or shape
        if shape.contract < CURRENT:
            raise ContractAhead(shape)
    if by == "pool" and shape.contract > CURRENT:
        log.warning(
            "this worker reads event contract version %d; %s records %d: entries of newer "
            "producers will be dead-lettered",
            CURRENT,
            shape_key(shape.prefix),
            shape.contract,
        )
    return shape


def _remember(redis: Redis, prefix: str, values: Sequence[object]) -> Shape:
    partitions, recorded_prefix, contract, by = (text(v) for v in values)
    shape = Shape(
        partitions=int(partitions),
        prefix=recorded_prefix or prefix,
        contract=int(contract or 0),
        by=by or "pool",
    )
    _known.setdefault(redis, {})[prefix] = shape
    return shape


async def partitions_for_reader(redis: Redis, prefix: str, partitions: int | None) -> int:
    """An SDK reader's count: the recorded one (`partitions`, else `TERMINUS_PARTITIONS`, else
    16 when nothing is recorded); `ShapeMismatch` if a set count disagrees with it. Never
    records: a reader's count routes nothing."""
    given, source = configured(partitions)
    return await partitions_of(redis, prefix, given, source=source)
