"""The producer refuses, at once, an attempt the workers would refuse: a repeated or skipped
number (service/sdk/attempts.py)."""

from __future__ import annotations

import pytest

from terminus.service.sdk.attempts import AttemptOrder, AttemptOrderError


def test_by_default_each_attempt_is_the_next_of_its_step() -> None:
    order = AttemptOrder()
    assert [order.next() for _ in range(3)] == [(1, 1), (1, 2), (1, 3)]
    assert order.next(step=2) == (2, 1)
    assert order.next() == (2, 2)


@pytest.mark.parametrize(
    ("done", "step", "attempt", "expected"),
    [
        ([], 1, 2, "expected attempt 1 of step 1"),
        ([], 2, None, "expected attempt 1 of step 1"),
        ([(1, 1)], 1, 1, "attempt 1 of step 1 cannot start after attempt 1 of step 1"),
        ([(1, 1)], 1, 3, "expected attempt 2 of step 1 (a retry) or attempt 1 of step 2"),
        ([(1, 1)], 2, 2, "attempt 2 of step 2 cannot start"),
        ([(1, 1)], 3, None, "attempt 1 of step 3 cannot start"),
        ([(1, 1), (1, 2)], 1, 2, "attempt 2 of step 1 cannot start"),
    ],
)
def test_a_repeated_or_skipped_attempt_raises(
    done: list[tuple[int, int]], step: int | None, attempt: int | None, expected: str
) -> None:
    order = AttemptOrder()
    for done_step, done_attempt in done:
        order.next(done_step, done_attempt)
    before = (order.step, order.attempt, order.started)
    with pytest.raises(AttemptOrderError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        order.next(step, attempt)
    assert (order.step, order.attempt, order.started) == before, "a refusal changes nothing"
