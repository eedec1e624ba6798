"""Every setting of the service, read once from the environment into one typed object.

| variable | default | meaning |
|---|---|---|
| `REDIS_URL` | unset: embedded | `redis://[user:password@]host:port/db`, `rediss://` for TLS |
| `TERMINUS_PREFIX` | `terminus` | key prefix |
| `TERMINUS_PARTITIONS` | as recorded, else 16 | partitions P, fixed per deployment (shape.py) |
| `TERMINUS_BATCH_SIZE` | 512 | entries per XREADGROUP batch |
| `TERMINUS_BLOCK_MS` | 1000 | XREADGROUP block time |
| `TERMINUS_LANES` | 8 | most pump loops per worker: one at light load (runtime/lanes.py) |
| `TERMINUS_LEASE_TTL_MS` | 10000 | partition lease time to live |
| `TERMINUS_STALL_TIMEOUT_MS` | 60000 | silence after which an attempt is stalled |
| `TERMINUS_TOOL_TIMEOUT_MS` | 600000 | silence while tools run before the turn is given up |
| `TERMINUS_MAX_DELIVERIES` | 5 | deliveries before an entry is dead-lettered |
| `TERMINUS_MAX_EVENT_BYTES` | 1048576 | largest inbound event (larger: dead-lettered, first KiB) |
| `TERMINUS_MAX_SSE_LINE_CHARS` | 16777216 | producers: longest SSE line read from a provider |
| `TERMINUS_MAX_SSE_EVENT_CHARS` | 16777216 | producers: longest SSE event data or JSON element |
| `TERMINUS_MAX_BODY_BYTES` | 268435456 | producers: largest provider response body, decoded |
| `TERMINUS_MAX_BODY_RATIO` | 1000 | producers: most decoded bytes per received byte |
| `TERMINUS_MAX_ERROR_BODY_BYTES` | 65536 | producers: most of an error body kept (an excerpt) |
| `TERMINUS_MAX_ATTEMPTS` | 3 | attempts per step |
| `TERMINUS_RETRY_CAPS` | empty | per-cause caps, `rate_limit=5,missing_terminal=2` |
| `TERMINUS_WAIT_BUDGET_MS` | 300000 | total retry wait per turn |
| `TERMINUS_KEEP_PARTIAL` | 1 | keep a failed attempt as a partial record (0: discard) |
| `TERMINUS_SESSION_MAXLEN` | 10000 | approximate cap of each session stream |
| `TERMINUS_LOG_FORMAT` | `text` | `json`: one JSON object per log line (service/runtime/logs.py) |
| `TERMINUS_CORS_ORIGINS` | empty: off | origins whose pages may call the gateway (or `*`) |
| `TERMINUS_LOG_LEVEL` | `info` | `debug`, `info`, `warning` or `error`: the service's log level |
| `TERMINUS_ARCHIVE_DIR` | `./var/archive` | where archived log segments go (retention/archive.py) |
| `TERMINUS_RETAIN_MS` | 0: off | archive final turns older than this (at least 2000), trim logs |
| `TERMINUS_REDIS_CLUSTER` | 0 | 1: `REDIS_URL` names any node of a Redis Cluster |
| `TERMINUS_TRACES` | 0 | 1: `terminus run` also exports every turn's spans (docs/traces.md) |
| `TERMINUS_COALESCE_READS` | 1 | 0: producer routes publish each provider event apart |
| `TERMINUS_COMMIT_WAIT_REPLICAS` | 0 | >0: WAIT after each commit for this many replicas |
| `TERMINUS_COMMIT_WAIT_MS` | 100 | how long that WAIT may block (a shortfall is logged) |
| `TERMINUS_LATENCY_BUDGET_MS` | 16 | the latency a worker may add at light load: sets the linger |
| `TERMINUS_LINGER_MS` | unset | a fixed linger between rounds at light load instead (0: none) |
| `TERMINUS_MAX_STREAMS_PER_TOKEN` | 8 | update streams a gateway token may hold open at once |
| `TERMINUS_HTTP_MAX_HEAD_BYTES` | 32768 | largest request line and headers the gateway reads |
| `TERMINUS_HTTP_HEAD_TIMEOUT_S` | 10 | time for a request's head to arrive whole (408, or closed) |
| `TERMINUS_HTTP_IDLE_TIMEOUT_S` | 5 | time a gateway connection may sit idle between requests |

The gateway's token keys are read by service/gateway/tokens.py (`TERMINUS_TOKEN_SECRETS`,
`TERMINUS_TOKEN_KEYS_FILE`, `TERMINUS_TOKEN_SECRET`, else the keys file of `TERMINUS_STATE_DIR`,
service/gateway/keystore.py), never stored here: settings get printed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Literal

import msgspec
from redis import connection as redis_connection

from terminus.events.codec import MAX_EVENT_BYTES
from terminus.events.limits import (
    MAX_BODY_BYTES,
    MAX_BODY_RATIO,
    MAX_ERROR_BODY_BYTES,
    MAX_SSE_EVENT_CHARS,
    MAX_SSE_LINE_CHARS,
    UpstreamLimits,
)
from terminus.service import TerminusError
from terminus.service.keys import DEFAULT_PREFIX
from terminus.service.redaction import SecretUrl
from terminus.statemachines.config import CoreConfig
from terminus.statemachines.retry_policy import RetryPolicy

MIN_RETAIN_MS = 2_000
# How redis-py reads a URL (`Redis.from_url`, the cluster's and FastStream's too): what it
# refuses, every command would refuse, with a traceback.
_parse_url: Callable[[str], dict[str, object]] = redis_connection.parse_url


class SettingsError(TerminusError, ValueError):
    """A variable is set to something that cannot be used; the message names it."""


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    redis_url: SecretUrl | None = None  # printed masked; `.reveal()` where a client is made
    prefix: str = DEFAULT_PREFIX
    partitions: int = 16
    # Set (TERMINUS_PARTITIONS): must agree with the count the deployment recorded; else that
    # count replaces the default when a process starts (service/shape.py).
    partitions_given: bool = False
    batch_size: int = 512
    block_ms: int = 1000
    lanes: int = 8  # most lanes in use (runtime/lanes.py): one at light load
    lease_ttl_ms: int = 10_000
    stall_timeout_ms: int = 60_000
    tool_timeout_ms: int = 600_000
    max_deliveries: int = 5
    max_event_bytes: int = MAX_EVENT_BYTES
    max_sse_line_chars: int = MAX_SSE_LINE_CHARS
    max_sse_event_chars: int = MAX_SSE_EVENT_CHARS
    max_body_bytes: int = MAX_BODY_BYTES
    max_body_ratio: int = MAX_BODY_RATIO
    max_error_body_bytes: int = MAX_ERROR_BODY_BYTES
    max_attempts: int = 3
    retry_caps: dict[str, int] = msgspec.field(default_factory=dict)
    wait_budget_ms: int = 300_000
    keep_partial: bool = True
    session_maxlen: int = 10_000
    log_format: Literal["text", "json"] = "text"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    archive_dir: str = "./var/archive"
    retain_ms: int = 0  # 0: no retention, the log is never trimmed by the workers
    redis_cluster: bool = False
    traces: bool = False  # `terminus run` runs `terminus traces` beside its workers
    # The gateway's producer routes publish each body read's deltas of one part as one event
    # (`Producer.coalesce_reads`, service/sdk/publisher.py).
    coalesce_reads: bool = True
    commit_wait_replicas: int = 0
    commit_wait_ms: int = 100
    # Rounds at light load (runtime/pump.py, _pace) go at most every linger: `linger_ms` when
    # set, else a linger that keeps the latency a worker adds within `latency_budget_ms`.
    linger_ms: int | None = None
    latency_budget_ms: int = 16
    cors_origins: list[str] = msgspec.field(default_factory=list)
    max_streams_per_token: int = 8
    http_max_head_bytes: int = 32_768  # the gateway's server bounds: service/gateway/heads.py
    http_head_timeout_s: int = 10
    http_idle_timeout_s: int = 5

    def __post_init__(self) -> None:
        # A plain string given where the type says SecretUrl (from untyped code: a dict of
        # values, a test harness) is wrapped, so no caller can leave the password printable.
        given: object = self.redis_url
        if isinstance(given, str):
            msgspec.structs.force_setattr(self, "redis_url", SecretUrl(given))

    def core(self) -> CoreConfig:
        """The pure core's configuration derived from these settings."""
        retry = RetryPolicy(
            max_attempts=self.max_attempts,
            cause_caps=dict(self.retry_caps),
            wait_budget_ms=self.wait_budget_ms,
        )
        return CoreConfig(retry=retry, keep_partial=self.keep_partial)

    def upstream_limits(self) -> UpstreamLimits:
        """What a producer configured by these settings reads from a provider, at most."""
        return UpstreamLimits(
            max_sse_line_chars=self.max_sse_line_chars,
            max_sse_event_chars=self.max_sse_event_chars,
            max_body_bytes=self.max_body_bytes,
            max_body_ratio=self.max_body_ratio,
            max_error_body_bytes=self.max_error_body_bytes,
        )


_INTS = {
    "TERMINUS_PARTITIONS": "partitions",
    "TERMINUS_BATCH_SIZE": "batch_size",
    "TERMINUS_BLOCK_MS": "block_ms",
    "TERMINUS_LANES": "lanes",
    "TERMINUS_LEASE_TTL_MS": "lease_ttl_ms",
    "TERMINUS_STALL_TIMEOUT_MS": "stall_timeout_ms",
    "TERMINUS_TOOL_TIMEOUT_MS": "tool_timeout_ms",
    "TERMINUS_MAX_DELIVERIES": "max_deliveries",
    "TERMINUS_MAX_EVENT_BYTES": "max_event_bytes",
    "TERMINUS_MAX_SSE_LINE_CHARS": "max_sse_line_chars",
    "TERMINUS_MAX_SSE_EVENT_CHARS": "max_sse_event_chars",
    "TERMINUS_MAX_BODY_BYTES": "max_body_bytes",
    "TERMINUS_MAX_BODY_RATIO": "max_body_ratio",
    "TERMINUS_MAX_ERROR_BODY_BYTES": "max_error_body_bytes",
    "TERMINUS_MAX_ATTEMPTS": "max_attempts",
    "TERMINUS_WAIT_BUDGET_MS": "wait_budget_ms",
    "TERMINUS_SESSION_MAXLEN": "session_maxlen",
    "TERMINUS_COMMIT_WAIT_MS": "commit_wait_ms",
    "TERMINUS_MAX_STREAMS_PER_TOKEN": "max_streams_per_token",
    "TERMINUS_HTTP_MAX_HEAD_BYTES": "http_max_head_bytes",
    "TERMINUS_HTTP_HEAD_TIMEOUT_S": "http_head_timeout_s",
    "TERMINUS_HTTP_IDLE_TIMEOUT_S": "http_idle_timeout_s",
}
_COUNTS = {  # may be 0
    "TERMINUS_COMMIT_WAIT_REPLICAS": "commit_wait_replicas",
    "TERMINUS_LINGER_MS": "linger_ms",
    "TERMINUS_LATENCY_BUDGET_MS": "latency_budget_ms",
}
_ORIGIN = re.compile(r"https?://[A-Za-z0-9.\-\[\]:]+")
_FLAGS = {
    "TERMINUS_KEEP_PARTIAL": "keep_partial",
    "TERMINUS_REDIS_CLUSTER": "redis_cluster",
    "TERMINUS_TRACES": "traces",
    "TERMINUS_COALESCE_READS": "coalesce_reads",
}


def from_env(env: Mapping[str, str]) -> Settings:
    """Settings from an environment mapping (pass `os.environ`); raises `SettingsError`."""
    values: dict[str, object] = {
        name: _positive(env, var) for var, name in _INTS.items() if var in env
    }
    values["partitions_given"] = "TERMINUS_PARTITIONS" in env
    for var, (name, parse) in _TEXTS.items():
        if env.get(var, "").strip():
            values[name] = parse(env[var])
    if env.get("TERMINUS_RETAIN_MS", "").strip():
        values["retain_ms"] = _retain_ms(env)
    for var, name in _COUNTS.items():
        if var in env:
            values[name] = _count(env, var)
    for var, name in _FLAGS.items():
        if var in env:
            values[name] = env[var].strip().lower() not in ("0", "false", "no")
    return msgspec.convert(values, Settings)


def _count(env: Mapping[str, str], var: str) -> int:
    try:
        value = int(env[var])
    except ValueError:
        raise SettingsError(f"{var}={env[var]!r} is not an integer") from None
    if value < 0:
        raise SettingsError(f"{var}={value} must be at least 0")
    return value


def _positive(env: Mapping[str, str], var: str) -> int:
    try:
        value = int(env[var])
    except ValueError:
        raise SettingsError(f"{var}={env[var]!r} is not an integer") from None
    if value < 1:
        raise SettingsError(f"{var}={value} must be at least 1")
    return value


def _retain_ms(env: Mapping[str, str]) -> int:
    var = "TERMINUS_RETAIN_MS"
    try:
        value = int(env[var])
    except ValueError:
        raise SettingsError(f"{var}={env[var]!r} is not an integer") from None
    # The archive must never hold an entry that Redis may still lose: with AOF `everysec`, a
    # crash loses up to about a second of writes, so only entries older than that are archived.
    if value != 0 and value < MIN_RETAIN_MS:
        raise SettingsError(f"{var}={value} must be 0 (off) or at least {MIN_RETAIN_MS}")
    return value


def _caps(text: str) -> dict[str, int]:
    caps: dict[str, int] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        cause, _, number = item.partition("=")
        if not number.strip().isdigit():
            raise SettingsError(f"TERMINUS_RETRY_CAPS: {item!r} is not cause=number")
        caps[cause.strip()] = int(number)
    return caps


def _log_format(text: str) -> str:
    value = text.strip().lower()
    if value not in ("text", "json"):
        raise SettingsError(f"TERMINUS_LOG_FORMAT={text!r} must be text or json")
    return value


def _log_level(text: str) -> str:
    value = text.strip().lower()
    if value not in ("debug", "info", "warning", "error"):
        raise SettingsError(f"TERMINUS_LOG_LEVEL={text!r} must be debug, info, warning or error")
    return value


def _origins(text: str) -> list[str]:
    """Comma-separated origins, each `scheme://host[:port]` as a browser sends it, or `*`."""
    origins = [item.strip().rstrip("/") for item in text.split(",") if item.strip()]
    for origin in origins:
        if origin != "*" and not _ORIGIN.fullmatch(origin):
            raise SettingsError(
                f"TERMINUS_CORS_ORIGINS: {origin!r} is not an origin (scheme://host[:port])"
            )
    return origins


def _redis_url(text: str) -> SecretUrl:
    """`text` if redis-py can connect by it, else its reason (a bad scheme, port or parameter).
    Neither the URL nor the values the reason quotes are shown: a URL that does not parse may
    hold its password where the port should be (`redis://:password`)."""
    try:
        _parse_url(text)
    except ValueError as exc:
        reason = re.sub(r" as '.*'", "", str(exc))
        raise SettingsError(f"REDIS_URL does not parse: {reason}") from None
    return SecretUrl(text)


def _prefix(text: str) -> str:
    # A brace in the prefix would become the Cluster hash tag and scatter a commit across slots.
    if "{" in text or "}" in text:
        raise SettingsError(f"TERMINUS_PREFIX={text!r} must not contain braces")
    return text


# Settings given as text: variable -> (field, parser that raises `SettingsError`).
_TEXTS: dict[str, tuple[str, Callable[[str], object]]] = {
    "REDIS_URL": ("redis_url", _redis_url),
    "TERMINUS_PREFIX": ("prefix", _prefix),
    "TERMINUS_LOG_FORMAT": ("log_format", _log_format),
    "TERMINUS_LOG_LEVEL": ("log_level", _log_level),
    "TERMINUS_ARCHIVE_DIR": ("archive_dir", str),
    "TERMINUS_RETRY_CAPS": ("retry_caps", _caps),
    "TERMINUS_CORS_ORIGINS": ("cors_origins", _origins),
}
