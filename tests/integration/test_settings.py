"""`from_env`: defaults, every variable, and errors that name the variable."""

from __future__ import annotations

import pytest

from terminus.events.adapters import UpstreamLimits
from terminus.service.redaction import SecretUrl
from terminus.service.settings import Settings, SettingsError, from_env

INT_VARS = {
    "TERMINUS_PARTITIONS": "partitions",
    "TERMINUS_BATCH_SIZE": "batch_size",
    "TERMINUS_BLOCK_MS": "block_ms",
    "TERMINUS_LEASE_TTL_MS": "lease_ttl_ms",
    "TERMINUS_STALL_TIMEOUT_MS": "stall_timeout_ms",
    "TERMINUS_MAX_DELIVERIES": "max_deliveries",
    "TERMINUS_MAX_ATTEMPTS": "max_attempts",
    "TERMINUS_WAIT_BUDGET_MS": "wait_budget_ms",
    "TERMINUS_SESSION_MAXLEN": "session_maxlen",
    "TERMINUS_MAX_SSE_LINE_CHARS": "max_sse_line_chars",
    "TERMINUS_MAX_SSE_EVENT_CHARS": "max_sse_event_chars",
    "TERMINUS_MAX_BODY_BYTES": "max_body_bytes",
    "TERMINUS_MAX_BODY_RATIO": "max_body_ratio",
    "TERMINUS_MAX_ERROR_BODY_BYTES": "max_error_body_bytes",
}


def test_an_empty_environment_gives_the_defaults() -> None:
    settings = from_env({})
    assert settings == Settings()
    assert settings.redis_url is None
    assert (settings.prefix, settings.partitions, settings.max_attempts) == ("terminus", 16, 3)
    assert settings.retry_caps == {}
    assert settings.keep_partial is True


def test_every_variable_is_read() -> None:
    env = {var: str(100 + n) for n, var in enumerate(INT_VARS)}
    env |= {
        "REDIS_URL": "rediss://user:secret@redis.example:6380/1",
        "TERMINUS_PREFIX": "staging",
        "TERMINUS_RETRY_CAPS": "rate_limit=5",
        "TERMINUS_KEEP_PARTIAL": "0",
        "TERMINUS_ARCHIVE_DIR": "/srv/archive",
        "TERMINUS_RETAIN_MS": "86400000",
    }
    settings = from_env(env)
    for n, field in enumerate(INT_VARS.values()):
        assert getattr(settings, field) == 100 + n
    assert settings.redis_url == SecretUrl("rediss://user:secret@redis.example:6380/1")
    assert settings.prefix == "staging"
    assert settings.retry_caps == {"rate_limit": 5}
    assert settings.keep_partial is False
    assert (settings.archive_dir, settings.retain_ms) == ("/srv/archive", 86_400_000)


@pytest.mark.parametrize("value", ["abc", "-1", "1", "1999"])
def test_retention_is_off_or_older_than_what_redis_may_lose(value: str) -> None:
    with pytest.raises(SettingsError, match="TERMINUS_RETAIN_MS"):
        from_env({"TERMINUS_RETAIN_MS": value})
    assert from_env({"TERMINUS_RETAIN_MS": "0"}).retain_ms == 0
    assert from_env({"TERMINUS_RETAIN_MS": "2000"}).retain_ms == 2000
    assert from_env({}).archive_dir == "./var/archive"


def test_empty_url_and_prefix_mean_unset() -> None:
    assert from_env({"REDIS_URL": "", "TERMINUS_PREFIX": ""}) == Settings()


@pytest.mark.parametrize("var", INT_VARS)
@pytest.mark.parametrize("value", ["abc", "1.5", "", "0", "-3"])
def test_a_bad_integer_names_its_variable(var: str, value: str) -> None:
    with pytest.raises(SettingsError, match=var):
        from_env({var: value})


@pytest.mark.parametrize(
    ("text", "caps"),
    [
        ("", {}),
        ("rate_limit=5", {"rate_limit": 5}),
        (" rate_limit = 5 , missing_terminal=2,", {"rate_limit": 5, "missing_terminal": 2}),
        ("stalled=0", {"stalled": 0}),
    ],
)
def test_retry_caps_parse(text: str, caps: dict[str, int]) -> None:
    settings = from_env({"TERMINUS_RETRY_CAPS": text})
    assert settings.retry_caps == caps
    assert settings.core().retry.cause_caps == caps


@pytest.mark.parametrize("text", ["rate_limit", "rate_limit=", "rate_limit=x", "rate_limit=-1"])
def test_bad_retry_caps_name_the_variable(text: str) -> None:
    with pytest.raises(SettingsError, match="TERMINUS_RETRY_CAPS"):
        from_env({"TERMINUS_RETRY_CAPS": text})


@pytest.mark.parametrize(
    ("text", "keep"),
    [("1", True), ("yes", True), ("0", False), ("false", False), (" No ", False)],
)
def test_keep_partial(text: str, keep: bool) -> None:
    assert from_env({"TERMINUS_KEEP_PARTIAL": text}).keep_partial is keep
    assert from_env({"TERMINUS_KEEP_PARTIAL": text}).core().keep_partial is keep


def test_settings_reach_the_core() -> None:
    env = {"TERMINUS_MAX_ATTEMPTS": "7", "TERMINUS_WAIT_BUDGET_MS": "1234"}
    retry = from_env(env).core().retry
    assert (retry.max_attempts, retry.wait_budget_ms) == (7, 1234)


def test_settings_reach_a_producers_limits() -> None:
    env = {"TERMINUS_MAX_SSE_EVENT_CHARS": "4096", "TERMINUS_MAX_ERROR_BODY_BYTES": "512"}
    limits = from_env(env).upstream_limits()
    assert (limits.max_sse_event_chars, limits.max_error_body_bytes) == (4096, 512)
    assert from_env({}).upstream_limits() == UpstreamLimits()
