"""Key layout: a stable partition per session, and one Redis Cluster slot per partition."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio import Redis
from redis.crc import key_slot

from terminus.service.keys import Keys, keys_for_session, partition_of

# The CRC-32 check value: partition_of is IEEE CRC-32 itself when P exceeds its range.
CHECK_VALUE = 0xCBF43926


def partition_keys(keys: Keys, session_id: str, turn_id: str) -> list[str]:
    """Every key a commit of this partition may touch."""
    return [
        keys.inbound,
        keys.commands,
        keys.dead,
        keys.open_turns,
        keys.transitions,
        keys.marks(keys.transitions),
        keys.marks(keys.commands),
        keys.archived,
        keys.resting,
        keys.lease,
        keys.epoch,
        keys.session(session_id),
        keys.turn(turn_id),
        keys.messages(session_id),
        keys.message_order(session_id),
        keys.partials(session_id),
    ]


def test_partition_is_ieee_crc32() -> None:
    assert partition_of("123456789", 1 << 32) == CHECK_VALUE


@pytest.mark.parametrize(
    ("session_id", "crc", "p16"),
    [
        ("session-a", 1219227610, 10),
        ("session-1", 599834158, 14),
        ("s-0", 2936366424, 8),
        ("chat/42", 3279343277, 13),
        ("café", 2561491637, 5),
    ],
)
def test_partition_values_are_pinned(session_id: str, crc: int, p16: int) -> None:
    assert partition_of(session_id, 1 << 32) == crc
    assert partition_of(session_id, 16) == p16
    assert partition_of(session_id, 7) == crc % 7


@given(st.text(), st.integers(min_value=1, max_value=1024))
def test_partition_is_in_range(session_id: str, partitions: int) -> None:
    assert 0 <= partition_of(session_id, partitions) < partitions


@given(
    session_id=st.text(),
    turn_id=st.text(),
    partitions=st.integers(min_value=1, max_value=64),
    prefix=st.sampled_from(["terminus", "replay", "t-0123", "a:b"]),
)
def test_every_key_of_a_partition_has_its_hash_tag_and_slot(
    session_id: str, turn_id: str, partitions: int, prefix: str
) -> None:
    keys = keys_for_session(session_id, partitions, prefix)
    tag = f"{{{keys.partition}}}"
    names = partition_keys(keys, session_id, turn_id)
    # Cluster hashes the first {...} of a key, so the tag must precede any brace in an id.
    assert all(name.startswith(f"{prefix}:{tag}:") for name in names)
    assert {key_slot(name.encode()) for name in names} == {key_slot(tag[1:-1].encode())}


def test_braces_in_ids_do_not_move_the_slot() -> None:
    keys = Keys(3)
    slots = {key_slot(k.encode()) for k in partition_keys(keys, "{other}", "}{x}")}
    assert slots == {key_slot(b"3")}


def test_partitions_spread_over_distinct_slots() -> None:
    assert len({key_slot(Keys(p).inbound.encode()) for p in range(16)}) == 16


async def test_one_transaction_writes_every_key_of_a_partition(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    keys = keys_for_session("session-a", 16, prefix)
    names = partition_keys(keys, "session-a", "turn-1")
    async with admin_redis.pipeline(transaction=True) as pipe:  # one MULTI of every kind of key
        for name in names:
            pipe.set(name, b"x")
        await pipe.execute()
    found = [k async for k in redis.scan_iter(match=f"{keys.root}:*")]
    assert sorted(k.decode() for k in found) == sorted(names)
