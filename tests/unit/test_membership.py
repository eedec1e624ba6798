"""Rendezvous assignment of partitions to workers (service/runtime/membership.py), without Redis."""

from __future__ import annotations

from typing import Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from terminus.service.runtime.membership import assigned, owner_of

PROPERTY: Final = settings(max_examples=200, deadline=None)
POOLS: Final = [
    ["worker-a"],
    ["worker-a", "worker-b"],
    ["w1", "w2", "w3"],
    [f"host-{n}" for n in range(7)],
]

worker_ids = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1)
pools = st.lists(worker_ids, min_size=1, max_size=8, unique=True)
partition_counts = st.integers(min_value=1, max_value=64)


def shares(partitions: int, pool: list[str]) -> dict[str, set[int]]:
    return {worker: assigned(partitions, pool, worker) for worker in pool}


def assert_partitioned(partitions: int, pool: list[str]) -> None:
    """Every partition goes to exactly one worker of the pool."""
    found = shares(partitions, pool)
    assert sum(len(mine) for mine in found.values()) == partitions
    assert set().union(*found.values()) == set(range(partitions))


@pytest.mark.parametrize("pool", POOLS, ids=lambda pool: f"{len(pool)}-workers")
@pytest.mark.parametrize("partitions", [1, 4, 16, 64])
def test_every_partition_has_exactly_one_owner(partitions: int, pool: list[str]) -> None:
    assert_partitioned(partitions, pool)


def test_nobody_owns_anything_without_a_pool_or_outside_it() -> None:
    assert assigned(16, [], "worker-a") == set()
    assert assigned(16, ["worker-b"], "worker-a") == set()
    assert assigned(16, ["worker-a"], "worker-a") == set(range(16))


def test_assignment_is_fixed_by_the_ids_alone() -> None:
    pool = ["worker-a", "worker-b"]
    assert assigned(16, pool, "worker-a") == {0, 3, 4, 6, 7, 9, 11, 13, 14}
    assert assigned(16, list(reversed(pool)), "worker-b") == {1, 2, 5, 8, 10, 12, 15}


def test_a_joining_worker_takes_only_what_it_wins() -> None:
    before = ["w1", "w2", "w3"]
    after = [*before, "w4"]
    for partition in range(64):
        assert owner_of(partition, after) in (owner_of(partition, before), "w4")


def test_with_many_partitions_each_of_two_workers_gets_about_half() -> None:
    mine = assigned(1024, ["worker-a", "worker-b"], "worker-a")
    assert 1024 * 0.4 < len(mine) < 1024 * 0.6


@PROPERTY
@given(partition_counts, pools)
def test_any_pool_partitions_every_partition_once(partitions: int, pool: list[str]) -> None:
    assert_partitioned(partitions, pool)


@PROPERTY
@given(partition_counts, pools, st.permutations(range(8)))
def test_the_order_of_the_pool_does_not_matter(
    partitions: int, pool: list[str], order: list[int]
) -> None:
    shuffled = [pool[i] for i in order if i < len(pool)]
    assert shares(partitions, shuffled) == shares(partitions, pool)


@PROPERTY
@given(partition_counts, pools, worker_ids)
def test_joining_moves_only_partitions_to_the_newcomer(
    partitions: int, pool: list[str], newcomer: str
) -> None:
    if newcomer in pool:
        return
    before, after = shares(partitions, pool), shares(partitions, [*pool, newcomer])
    for worker in pool:
        assert after[worker] <= before[worker]
        assert before[worker] - after[worker] <= after[newcomer]


@PROPERTY
@given(partition_counts, pools.filter(lambda p: len(p) > 1), st.data())
def test_leaving_moves_only_the_partitions_of_the_one_that_left(
    partitions: int, pool: list[str], data: st.DataObject
) -> None:
    gone = data.draw(st.sampled_from(pool))
    rest = [w for w in pool if w != gone]
    before, after = shares(partitions, pool), shares(partitions, rest)
    for worker in rest:
        assert after[worker] >= before[worker]
        assert after[worker] - before[worker] <= before[gone]
