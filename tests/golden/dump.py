"""A canonical dump of what the workers committed under a prefix, for golden comparisons.

Keys are written relative to the prefix. Streams are dumped as their entries' fields without the
ids (ids are server time); hashes as sorted mappings, sorted sets as (member, score) pairs in
order, strings as their value, and each turn snapshot whole, its tail put back
(service/fold/snapshots.py: the tail's chunk order depends on batch boundaries, the whole turn does
not). Left out: the inbound logs themselves (the input, not a projection), and the keys a
worker writes about itself rather than about the log: leases, epochs, metrics and membership.

A value is its text when it is UTF-8 and does not start with `base64:`, else `base64:` and its
bytes in base64, so every byte survives a JSON file.
"""

from __future__ import annotations

import base64
from typing import Any, Final, cast

import msgspec
from redis.asyncio import Redis

from terminus.service.fold.snapshots import TailLedger

Dump = dict[str, dict[str, Any]]
B64: Final = "base64:"
# The last segment of a partition key that is the worker's own bookkeeping, or the input.
SKIPPED: Final = frozenset(("in", "lease", "epoch", "metrics"))
SKIPPED_ROOTS: Final = ("workers", "metrics:", "control")


def encode_value(raw: bytes) -> str:
    """Text if it reads as such, else tagged base64: injective, so exact bytes survive."""
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        text = None
    if text is None or text.startswith(B64):
        return B64 + base64.b64encode(raw).decode()
    return text


def decode_value(text: str) -> bytes:
    """The bytes `encode_value` wrote as `text`."""
    if text.startswith(B64):
        return base64.b64decode(text[len(B64) :])
    return text.encode()


def relative(key: str, prefix: str) -> str | None:
    """`key` without `prefix:`, or None when it is not a projection of the log."""
    rest = key[len(prefix) + 1 :]
    if rest.startswith(SKIPPED_ROOTS):
        return None
    partition_key = rest.split(":", 1)[-1]
    if partition_key in SKIPPED or partition_key.startswith("tail:"):
        return None  # tails are dumped inside their turns
    return rest


async def canonical_dump(redis: Redis, prefix: str, source_prefix: str | None = None) -> Dump:
    """Every projection under `prefix`; `source_prefix` is where the folded log lived (dead
    letters name their source stream, which is made relative to it)."""
    keys = sorted([k.decode() async for k in redis.scan_iter(match=f"{prefix}:*", count=1000)])
    dump: Dump = {}
    for key in keys:
        name = relative(key, prefix)
        if name is not None:
            dump[name] = await _value(redis, key, source_prefix or prefix)
    return dump


async def _value(redis: Redis, key: str, source_prefix: str) -> dict[str, Any]:
    kind = cast(bytes, await redis.type(key)).decode()
    if kind == "stream":
        entries = cast("list[tuple[bytes, dict[bytes, bytes]]]", await redis.xrange(key))
        return {"stream": [_fields(f, source_prefix) for _, f in entries]}
    if kind == "hash":
        found = cast("dict[bytes, bytes]", await redis.hgetall(key))
        return {"hash": {k.decode(): encode_value(found[k]) for k in sorted(found)}}
    if kind == "zset":
        pairs = cast("list[tuple[bytes, float]]", await redis.zrange(key, 0, -1, withscores=True))
        return {"zset": [[encode_value(m), s] for m, s in pairs]}
    if kind == "string" and ":turn:" in key:
        return {"turn": await _whole_turn(redis, key)}
    if kind == "string":
        return {"string": encode_value(cast(bytes, await redis.get(key)))}
    raise AssertionError(f"{key}: a {kind} the dump does not know; teach it before recording")


def _fields(fields: dict[bytes, bytes], source_prefix: str) -> dict[str, str]:
    out = {k.decode(): encode_value(v) for k, v in fields.items()}
    if "source_stream" in out:
        out["source_stream"] = out["source_stream"].removeprefix(f"{source_prefix}:")
    return out


async def _whole_turn(redis: Redis, key: str) -> Any:
    base, tail = cast(
        "list[bytes | None]", await redis.mget([key, key.replace(":turn:", ":tail:", 1)])
    )
    assert base is not None
    # Through JSON, not `to_builtins`: a tuple must come out as the list a file reads back.
    return msgspec.json.decode(msgspec.json.encode(TailLedger().load(base, tail)))


def first_difference(expected: Dump, actual: Dump) -> str | None:
    """The first key (in order) whose value differs, with both values cut short; None if equal."""
    for key in sorted(expected.keys() | actual.keys()):
        want, got = expected.get(key), actual.get(key)
        if want != got:
            return f"{key}: expected {_short(want)}, got {_short(got)}"
    return None


def _short(value: object, width: int = 600) -> str:
    text = msgspec.json.encode(value).decode()
    return text if len(text) <= width else text[: width - 1] + "…"
