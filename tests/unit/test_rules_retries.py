"""Retry budgets: attempts, caps per cause, the wait budget, backoff and jitter (DESIGN
section 3)."""

from __future__ import annotations

import pytest
from factories import (
    OVERLOADED_BODY,
    Script,
    fold,
    frames_of,
)
from machine_checks import (
    S,
    Step,
    assert_failed_on_attempt,
    eof,
    one_agent_error,
    run_attempts,
)

from terminus.events.outbound import Retrying, RetryScheduled
from terminus.statemachines.config import CoreConfig
from terminus.statemachines.retry_policy import RetryPolicy, backoff_ms, jitter_fraction

# --- retry budgets ---------------------------------------------------------------------------


def _overloaded(s: Script) -> None:
    s.error(529, OVERLOADED_BODY)


def _stall(s: Script) -> None:
    s.stalled()


def _synthesized(s: Script) -> None:
    s.finish("other", None)


def test_max_attempts_caps_a_step_whatever_the_cause() -> None:
    s = Script()
    run_attempts(s, [eof, _overloaded, eof])
    turn, out = fold(s.events)
    assert_failed_on_attempt(turn, out, 3)
    assert [h.outcome for h in turn.history] == ["truncated", "failed", "truncated"]
    assert one_agent_error(out).error.attempt == 3


@pytest.mark.parametrize("ending", [eof, _overloaded, _stall, _synthesized])
def test_default_max_attempts_is_three(ending: Step) -> None:
    s = Script()
    run_attempts(s, [ending] * 3)
    turn, out = fold(s.events)
    assert_failed_on_attempt(turn, out, 3)


@pytest.mark.parametrize("max_attempts", [1, 2, 5])
def test_turn_started_overrides_max_attempts(max_attempts: int) -> None:
    s = Script(max_attempts=max_attempts)
    run_attempts(s, [eof] * max_attempts)
    turn, out = fold(s.events)
    assert_failed_on_attempt(turn, out, max_attempts)
    assert all(f.max_attempts == max_attempts for f in frames_of(out, Retrying))


def test_cause_cap_ends_retrying_before_max_attempts() -> None:
    config = CoreConfig(retry=RetryPolicy(cause_caps={"provider_unavailable": 2}))
    s = Script(max_attempts=6)
    run_attempts(s, [eof, _overloaded, eof, _overloaded])
    turn, out = fold(s.events, config)
    assert_failed_on_attempt(turn, out, 4)


def test_cause_cap_counts_only_its_own_cause() -> None:
    config = CoreConfig(retry=RetryPolicy(cause_caps={"missing_terminal": 1}))
    s = Script(max_attempts=6)
    run_attempts(s, [_overloaded, _stall, eof])
    turn, out = fold(s.events, config)
    assert_failed_on_attempt(turn, out, 3)


def test_wait_budget_ends_retrying_before_max_attempts() -> None:
    config = CoreConfig(retry=RetryPolicy(wait_budget_ms=5_000))
    s = Script(max_attempts=10, ts_ms=1_700_000_000_000)
    for attempt in (1, 2, 3):
        if attempt > 1:
            s.next_attempt()
        s.error(429, None, {"retry-after": "2"})
    turn, out = fold(s.events, config)
    assert_failed_on_attempt(turn, out, 3)
    assert [f.delay_ms for f in frames_of(out, Retrying)] == [2_000, 2_000]


NOW_MS = 1_700_000_000_000


@pytest.mark.parametrize(
    ("headers", "wait_ms"),
    [
        ({"retry-after": "7"}, 7_000),
        ({"retry-after-ms": "7500"}, 7_500),
        ({"x-llm-error-reset-at": str(NOW_MS + 9_000)}, 9_000),
    ],
)
def test_retry_after_is_honoured(headers: dict[str, str], wait_ms: int) -> None:
    s = Script(ts_ms=NOW_MS)
    s.error(429, None, headers)
    turn, out = fold(s.events)
    assert turn.state is S.RETRYING
    (retrying,) = frames_of(out, Retrying)
    assert retrying.delay_ms >= wait_ms
    command = out.commands[0]
    assert isinstance(command, RetryScheduled)
    assert command.delay_ms == retrying.delay_ms
    assert command.not_before_ms == NOW_MS + retrying.delay_ms


def _delays(turn_id: str) -> list[int]:
    s = Script(turn_id=turn_id, max_attempts=6)
    run_attempts(s, [eof] * 5)
    return [f.delay_ms for f in frames_of(fold(s.events)[1], Retrying)]


def test_backoff_is_replay_exact() -> None:
    delays = _delays("turn-jitter")
    assert delays == _delays("turn-jitter")
    policy = RetryPolicy()
    assert delays == [backoff_ms(policy, "turn-jitter", 1, a) for a in range(1, 6)]


def test_backoff_jitter_differs_across_attempts_and_turns() -> None:
    fractions = [jitter_fraction("turn-jitter", 1, a) for a in range(1, 9)]
    assert len(set(fractions)) == len(fractions)
    assert all(0 <= f < 1 for f in fractions)
    assert jitter_fraction("turn-jitter", 1, 1) != jitter_fraction("turn-jitter", 2, 1)
    assert _delays("turn-a") != _delays("turn-b")
    for attempt, delay in enumerate(_delays("turn-a"), start=1):
        ceiling = min(30_000, 500 * 2 ** (attempt - 1))
        assert ceiling // 2 <= delay < ceiling
