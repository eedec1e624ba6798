"""When to retry an attempt and how long to wait, replay-exact (DESIGN section 3).

`max_attempts` caps the attempts of a step whatever the cause; per-cause caps and a total wait
budget may stop earlier. Jitter comes from (turn_id, step, attempt), never from a random source.
"""

from __future__ import annotations

import hashlib

import msgspec

from terminus.events.errors import LLMErrorPayload

DEFAULT_MAX_ATTEMPTS = 3


class RetryPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """Retry limits and backoff; `cause_caps` caps the attempts one cause may end."""

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    cause_caps: dict[str, int] = msgspec.field(default_factory=dict)
    wait_budget_ms: int = 300_000
    base_delay_ms: int = 500
    max_delay_ms: int = 30_000


class RetryDecision(msgspec.Struct, frozen=True, kw_only=True):
    """Either a delay before the next attempt, or why retrying stops here."""

    retry: bool
    delay_ms: int = 0
    exhausted_by: str | None = None


def jitter_fraction(turn_id: str, step: int, attempt: int) -> float:
    """A number in [0, 1) fixed by the turn, step and attempt: the same on every replay."""
    digest = hashlib.blake2b(f"{turn_id}:{step}:{attempt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def backoff_ms(policy: RetryPolicy, turn_id: str, step: int, attempt: int) -> int:
    """Exponential backoff with equal jitter: half fixed, half drawn from the seeded fraction."""
    ceiling = min(policy.max_delay_ms, policy.base_delay_ms * 2 ** max(attempt - 1, 0))
    half = ceiling / 2
    return int(half + half * jitter_fraction(turn_id, step, attempt))


def hinted_delay_ms(error: LLMErrorPayload | None, now_ms: int) -> int:
    """The wait the provider asked for: retry-after, or the time until its reset, if known."""
    if error is None:
        return 0
    waits = [0]
    if error.retry_after_seconds is not None:
        waits.append(int(error.retry_after_seconds * 1000))
    if error.reset_at_epoch_ms is not None and now_ms > 0:
        waits.append(error.reset_at_epoch_ms - now_ms)
    return max(waits)


def decide_retry(
    policy: RetryPolicy,
    *,
    max_attempts: int,
    turn_id: str,
    step: int,
    attempt: int,
    cause_count: int,
    cause: str,
    waited_ms: int,
    error: LLMErrorPayload | None,
    now_ms: int,
) -> RetryDecision:
    """Retry `attempt` of `step` (the one that just failed), or say which limit stops it."""
    if attempt >= max_attempts:
        return RetryDecision(retry=False, exhausted_by="max_attempts")
    cap = policy.cause_caps.get(cause)
    if cap is not None and cause_count >= cap:
        return RetryDecision(retry=False, exhausted_by=f"cause_cap:{cause}")
    delay = max(backoff_ms(policy, turn_id, step, attempt), hinted_delay_ms(error, now_ms))
    if waited_ms + delay > policy.wait_budget_ms:
        return RetryDecision(retry=False, exhausted_by="wait_budget")
    return RetryDecision(retry=True, delay_ms=delay)
