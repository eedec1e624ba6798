"""A golden directory's files: the inbound log as JSON lines, the settings, the projections.

`inbound.jsonl` holds one line per entry of every partition's inbound log, in partition and id
order: `{"partition": p, "id": "<ms>-<n>", "fields": [[name, value], ...]}`, values encoded as
in dump.py (text, or `base64:`), so the exact bytes and the original ids come back. Loading a
log writes those entries with their ids into a fresh prefix and creates the workers' group at
each partition's last entry, which is where `terminus.service.cli.replay` stops reading.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import msgspec
from redis.asyncio import Redis

from terminus.service.cli.replay import rebuild
from terminus.service.keys import GROUP, Keys
from terminus.service.redis.replies import xrange
from terminus.service.settings import Settings

from .dump import Dump, canonical_dump, decode_value, encode_value

HERE: Final = Path(__file__).parent
LOG: Final = "inbound.jsonl"
SETTINGS: Final = "settings.json"
PROJECTIONS: Final = "projections.json"
NOT_RECORDED: Final = ("redis_url", "prefix")  # where the log lived, not how it was folded


class LogEntry(msgspec.Struct, frozen=True):
    partition: int
    id: str
    fields: list[tuple[str, str]]


def versions() -> list[Path]:
    """Every golden directory, oldest contract first."""
    return sorted(HERE.glob("v*/"), key=lambda p: int(p.name[1:]))


async def read_log(redis: Redis, prefix: str, partitions: int) -> list[LogEntry]:
    """Every inbound entry under `prefix`, with its id and fields as stored (in their order; an
    entry that repeats a field name keeps its last value, which producers never write)."""
    entries = []
    for partition in range(partitions):
        for entry_id, fields in await xrange(redis, Keys(partition, prefix).inbound):
            pairs = [(encode_value(k), encode_value(v)) for k, v in fields.items()]
            entries.append(LogEntry(partition, entry_id.decode(), pairs))
    return entries


async def load_log(redis: Redis, prefix: str, entries: list[LogEntry]) -> None:
    """Write `entries` under `prefix` with their own ids; the group stands after the last."""
    last: dict[int, str] = {}
    async with redis.pipeline(transaction=False) as pipe:
        for entry in entries:
            fields = {decode_value(k): decode_value(v) for k, v in entry.fields}
            pipe.xadd(Keys(entry.partition, prefix).inbound, fields, id=entry.id)  # type: ignore[arg-type]
            last[entry.partition] = entry.id
        await pipe.execute()
    for partition, entry_id in last.items():
        await redis.xgroup_create(Keys(partition, prefix).inbound, GROUP, id=entry_id)


def write_dir(directory: Path, settings: Settings, entries: list[LogEntry], dump: Dump) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    lines = b"".join(msgspec.json.encode(e) + b"\n" for e in entries)
    (directory / LOG).write_bytes(lines)
    kept = {k: v for k, v in msgspec.structs.asdict(settings).items() if k not in NOT_RECORDED}
    (directory / SETTINGS).write_bytes(pretty(kept))
    (directory / PROJECTIONS).write_bytes(pretty(dump))


def pretty(value: object) -> bytes:
    return msgspec.json.format(msgspec.json.encode(value, order="sorted"), indent=1) + b"\n"


def read_settings(directory: Path, prefix: str) -> Settings:
    recorded = msgspec.json.decode((directory / SETTINGS).read_bytes())
    return msgspec.convert({**recorded, "prefix": prefix}, Settings)


def read_entries(directory: Path) -> list[LogEntry]:
    decoder = msgspec.json.Decoder(LogEntry)
    return [decoder.decode(line) for line in (directory / LOG).read_bytes().splitlines()]


def read_projections(directory: Path) -> Dump:
    return msgspec.json.decode((directory / PROJECTIONS).read_bytes(), type=Dump)


async def replay_dir(redis: Redis, directory: Path, source: str, target: str) -> Dump:
    """Load the directory's log under `source`, rebuild it into `target`, dump `target`."""
    settings = read_settings(directory, source)
    await load_log(redis, source, read_entries(directory))
    await rebuild(redis, settings, target)
    return await canonical_dump(redis, target, source)
