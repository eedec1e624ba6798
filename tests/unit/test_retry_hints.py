"""Retry hints: durations, instants, headers (documented and observed samples), bodies, messages."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from terminus.statemachines.retry_hints import (
    NO_HINT,
    RetryHint,
    error_object,
    hint_from_body,
    hint_from_headers,
    hint_from_message,
    parse_duration,
    parse_instant_ms,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "provider-streams"
RESET_2024 = 1_711_483_200_000  # 2024-03-26T20:00:00Z
NOW_2024 = RESET_2024 - 1_000  # Tue, 26 Mar 2024 19:59:59 GMT


def load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return loaded


def fixture_headers(name: str) -> dict[str, str]:
    headers: dict[str, str] = load(name)["headers"]
    return headers


def exhausted(headers: dict[str, str]) -> dict[str, str]:
    """The same headers with every limit spent, as if this response had been the 429."""
    return {k: "0" if "remaining" in k else v for k, v in headers.items() if k != "retry-after"}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("120ms", 0.12),
        ("8ms", 0.008),
        ("2m59.56s", 179.56),
        ("7.66s", 7.66),
        ("15s", 15.0),
        ("1h2m", 3720.0),
        ("11.054s", 11.054),
        ("20ms", 0.02),
        ("1.5h", 5400.0),
        ("250us", 0.00025),
        ("0s", 0.0),
        ("3", 3.0),
        ("2.5", 2.5),
        (" 1s ", 1.0),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "soon", "-1s", "1x", "1 s", "1s2", "1e3", "inf", "nan"])
def test_parse_duration_rejects(text: str) -> None:
    assert parse_duration(text) is None


@given(
    st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(["h", "m", "s", "ms"])), min_size=1)
)
def test_parse_duration_sums_go_parts(parts: list[tuple[int, str]]) -> None:
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    text = "".join(f"{n}{unit}" for n, unit in parts)
    assert parse_duration(text) == pytest.approx(sum(n * scale[unit] for n, unit in parts))


@pytest.mark.parametrize(
    ("text", "epoch_ms"),
    [
        ("2024-03-26T20:00:00Z", RESET_2024),
        ("2024-03-26t20:00:00z", RESET_2024),
        ("2024-03-26T21:00:00+01:00", RESET_2024),
        ("2024-03-26T20:00:00.250Z", RESET_2024 + 250),
        ("2024-03-26T20:00:00.250999999Z", RESET_2024 + 250),
        ("Tue, 26 Mar 2024 19:59:59 GMT", NOW_2024),
        ("26 Mar 2024 19:59:59 GMT", NOW_2024),
        ("1970-01-01T00:00:00Z", 0),
    ],
)
def test_parse_instant_ms(text: str, epoch_ms: int) -> None:
    assert parse_instant_ms(text) == epoch_ms


@pytest.mark.parametrize(
    "text",
    [
        "",
        "soon",
        "2024-03-26T20:00:00",
        "2024-03-26",
        "1711483200",
        "Tue, 32 Mar 2024 19:59:59 GMT",
        "Tue, 26 Foo 2024 19:59:59 GMT",
        "Tue, 26 Mar 2024 19:59:59",
    ],
)
def test_parse_instant_ms_rejects(text: str) -> None:
    assert parse_instant_ms(text) is None


@given(st.datetimes(timezones=st.just(UTC)))
def test_parse_instant_ms_round_trips_rfc3339(instant: datetime) -> None:
    expected = (instant - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    assert parse_instant_ms(instant.isoformat()) == expected


@pytest.mark.parametrize(
    ("headers", "now_ms", "hint"),
    [
        ({}, NOW_2024, NO_HINT),
        ({"x-llm-error-reset-at": str(RESET_2024)}, 0, RetryHint(None, RESET_2024)),
        ({"x-llm-error-reset-at": "1711483200"}, NOW_2024, RetryHint(1.0, RESET_2024)),
        ({"x-llm-error-reset-at": "2024-03-26T20:00:00Z"}, 0, RetryHint(None, RESET_2024)),
        (
            {"X-LLM-Error-Reset-At": "1711483200", "retry-after": "9"},
            0,
            RetryHint(None, RESET_2024),
        ),
        ({"x-llm-error-reset-at": "later", "retry-after": "9"}, 0, RetryHint(9.0, None)),
        ({"retry-after-ms": "1500", "retry-after": "2"}, 0, RetryHint(1.5, None)),
        ({"retry-after-ms": "1500"}, NOW_2024, RetryHint(1.5, NOW_2024 + 1500)),
        ({"Retry-After": " 2 "}, 0, RetryHint(2.0, None)),
        ({"retry-after": "Tue, 26 Mar 2024 20:00:00 GMT"}, 0, RetryHint(None, RESET_2024)),
        ({"retry-after": "Tue, 26 Mar 2024 20:00:00 GMT"}, NOW_2024, RetryHint(1.0, RESET_2024)),
        (
            {"retry-after": "Tue, 26 Mar 2024 20:00:00 GMT"},
            RESET_2024 + 5000,
            RetryHint(0.0, RESET_2024),
        ),
        ({"retry-after": "whenever"}, 0, NO_HINT),
        (
            {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s"},
            NOW_2024,
            RetryHint(360.0, NOW_2024 + 360_000),
        ),
        (
            {"x-ratelimit-remaining-tokens": "1", "x-ratelimit-reset-tokens": "6m0s"},
            NOW_2024,
            NO_HINT,
        ),
        (
            {"x-ratelimit-reset-tokens": "6m0s"},
            NOW_2024,
            NO_HINT,
        ),
        (
            {
                "retry-after": "3",
                "x-ratelimit-remaining-tokens": "0",
                "x-ratelimit-reset-tokens": "6m0s",
            },
            0,
            RetryHint(3.0, None),
        ),
    ],
)
def test_hint_from_headers(headers: dict[str, str], now_ms: int, hint: RetryHint) -> None:
    assert hint_from_headers(headers, now_ms) == hint


def test_anthropic_429_waits_for_the_exhausted_limit_only() -> None:
    headers = fixture_headers("anthropic/http-429-headers-issue357.json")
    later = {**headers, "anthropic-ratelimit-tokens-reset": "2024-03-26T20:05:00Z"}
    assert hint_from_headers(later, NOW_2024) == RetryHint(1.0, RESET_2024)
    assert hint_from_headers(headers, 0) == RetryHint(None, RESET_2024)


ANTHROPIC_200 = "anthropic/http-200-ratelimit-headers-recorded-sdk-python.json"
OPENAI_DOCS = "openai-chat/ratelimit-headers-documented-sample-openai-docs.json"
OPENAI_OBSERVED = "openai-chat/ratelimit-headers-observed-open-webui-issue3743.json"
GROQ_DOCS = "openai-compatible/groq-ratelimit-headers-documented.json"
RESET_2026 = 1_772_049_757_000  # 2026-02-25T20:02:37Z, the latest of the four resets


@pytest.mark.parametrize("name", [ANTHROPIC_200, OPENAI_DOCS, OPENAI_OBSERVED])
def test_sample_headers_with_nothing_exhausted_give_no_hint(name: str) -> None:
    assert hint_from_headers(fixture_headers(name), NOW_2024) == NO_HINT


@pytest.mark.parametrize(
    ("name", "now_ms", "hint"),
    [
        (ANTHROPIC_200, 0, RetryHint(None, RESET_2026)),
        (ANTHROPIC_200, RESET_2026 - 7_000, RetryHint(7.0, RESET_2026)),
        (OPENAI_DOCS, 0, RetryHint(360.0, None)),
        (OPENAI_OBSERVED, 0, RetryHint(0.12, None)),
        (OPENAI_OBSERVED, NOW_2024, RetryHint(0.12, NOW_2024 + 120)),
        (GROQ_DOCS, 0, RetryHint(179.56, None)),
    ],
)
def test_sample_headers_with_every_limit_exhausted(name: str, now_ms: int, hint: RetryHint) -> None:
    got = hint_from_headers(exhausted(fixture_headers(name)), now_ms)
    assert got.reset_at_epoch_ms == hint.reset_at_epoch_ms
    assert got.retry_after_seconds == pytest.approx(hint.retry_after_seconds)


def test_groq_retry_after_beats_its_reset_durations() -> None:
    assert hint_from_headers(fixture_headers(GROQ_DOCS), 0) == RetryHint(2.0, None)


HINT_HEADERS = st.sampled_from(
    [
        "x-llm-error-reset-at",
        "retry-after-ms",
        "Retry-After",
        "anthropic-ratelimit-tokens-remaining",
        "anthropic-ratelimit-tokens-reset",
        "x-ratelimit-remaining-requests",
        "x-ratelimit-reset-requests",
    ]
)
HINT_VALUES = st.text(max_size=30) | st.from_regex(
    r"[0-9]{1,30}(\.[0-9]{0,3})?(ms|s|m|h)?", fullmatch=True
)


@given(st.dictionaries(HINT_HEADERS, HINT_VALUES), st.integers(0, 2**45))
def test_hint_from_headers_is_total(headers: dict[str, str], now_ms: int) -> None:
    hint = hint_from_headers(headers, now_ms)
    assert hint.retry_after_seconds is None or hint.retry_after_seconds >= 0


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("Rate limit reached. Please try again in 11.054s. Visit https://x", 11.054),
        ("Please try again in 20ms.", 0.02),
        ("Please try again in 1m30s.", 90.0),
        ("Please try again in 6m0s", 360.0),
        ("Please Try Again In 2S", 2.0),
        ("Please retry after 20 seconds.", 20.0),
        ("try again in 2 minutes", 120.0),
        ("try again in 500 milliseconds", 0.5),
        ("Please reduce the prompt length or try again later.", None),
        ("try again in 5minutes", 300.0),
        ("try again in 1h later", 3600.0),
        ("", None),
    ],
)
def test_hint_from_message(text: str, seconds: float | None) -> None:
    assert hint_from_message(text) == pytest.approx(seconds)


RATE_LIMITED = {
    "code": "rate_limit_exceeded",
    "message": "Rate limit reached for gpt-5.1. Please try again in 11.054s. Visit the docs.",
}


@pytest.mark.parametrize(
    ("body", "seconds"),
    [
        (
            load("gemini/http-429-resource-exhausted-retryinfo-langextract-issue50.json")["body"],
            15.0,
        ),
        (RATE_LIMITED, 11.054),
        ({"error": RATE_LIMITED}, 11.054),
        ({"type": "response.failed", "response": {"error": RATE_LIMITED}}, 11.054),
        (json.dumps({"error": RATE_LIMITED}), 11.054),
        ("Too many requests, try again in 3s", 3.0),
        (b'{"error": {"message": "try again in 1s"}}', 1.0),
        ({"error": {"details": [{"@type": "x/google.rpc.RetryInfo", "retryDelay": "0.5s"}]}}, 0.5),
        (
            {"error": {"details": [None, {"@type": "google.rpc.RetryInfo"}], "message": "in 1s"}},
            None,
        ),
        ({"error": {"details": "nope", "message": "try again in 4s"}}, 4.0),
        ({"error": "try again in 2s"}, 2.0),
        ({"error": {"message": 7}}, None),
        (None, None),
        (42, None),
        ("", None),
    ],
)
def test_hint_from_body(body: Any, seconds: float | None) -> None:
    assert hint_from_body(body) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"type": "error", "error": {"type": "x", "message": "m"}}, {"type": "x", "message": "m"}),
        ({"code": "c", "message": "m"}, {"code": "c", "message": "m"}),
        ({"response": {"error": None}, "type": "t"}, {"response": {"error": None}, "type": "t"}),
        ('{"error": {"code": "c"}}', {"code": "c"}),
        ("not json", {"message": "not json"}),
        ('"quoted"', {"message": "quoted"}),
        ("  ", None),
        ([1, 2], None),
        (None, None),
    ],
)
def test_error_object(body: Any, error: dict[str, Any] | None) -> None:
    assert error_object(body) == error
