"""Every Redis client and broker of the service is made here: one Redis, or a Redis Cluster.

`TERMINUS_REDIS_CLUSTER=1` with `REDIS_URL` naming any node of a cluster selects redis-py's
asyncio cluster client (`redis.asyncio.cluster.RedisCluster`) and FastStream's
`RedisClusterBroker` (with the URL's TLS options on its pub/sub client too: cluster_broker.py);
otherwise a plain `redis.asyncio.Redis` and `RedisBroker`.

The cluster client is typed as `Redis` everywhere: it offers the same command methods, and every
command terminus sends keeps its keys in one `{p}` slot, so the rest of the code is one path.
The few places that must differ (the pump's pipeline, blocking reads over many streams) ask
`is_cluster`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final, cast

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import (
    ClusterDownError,
    ConnectionError,
    SlotNotCoveredError,
    TimeoutError,
    TryAgainError,
)

from terminus.service.redis import embedded
from terminus.service.settings import Settings

if TYPE_CHECKING:
    from faststream.redis import RedisBroker

log = logging.getLogger("terminus.app")
KEEPALIVE_S: Final = 10

# Redis away for a moment, not a request that is wrong: the connection, or (on a cluster) a node
# that is down, loading or changing hands (CLUSTERDOWN, TRYAGAIN, a slot nobody serves yet).
# Nothing of a refused request was applied (or the next epoch fences it): worth retrying after a
# pause. The worker retries; the gateway answers 503 with Retry-After.
TRANSIENT: Final = (
    ConnectionError,
    TimeoutError,
    OSError,
    ClusterDownError,
    TryAgainError,
    SlotNotCoveredError,
)


def client_options(settings: Settings) -> dict[str, Any]:
    """Options that keep a client from hanging on a dead socket: every read has a timeout."""
    return {
        "socket_timeout": settings.block_ms / 1000 + 5,
        "socket_connect_timeout": 5,
        "socket_keepalive": True,
        "health_check_interval": KEEPALIVE_S,
    }


def no_resends() -> Retry:
    """The worker's retry policy: the client library never re-sends a command by itself.

    A command whose reply was lost may have run. redis-py's default re-sends it (up to 3 times on
    one Redis, 10 on a cluster, where one failed node also closes the whole client and re-sends
    what other nodes had already answered). A commit is fenced against a repeat (commit.lua's
    pending check), but the pump owns recovery: on a connection error every owner starts over
    from what Redis holds, and on a cluster the pump re-reads the slot map itself
    (`refresh_slots`), because with no retries redis-py's pipeline never does.
    """
    return Retry(NoBackoff(), 0)


class RedisAwayInOneLine(logging.Filter):
    """A record that carries a transient Redis error (`TRANSIENT`) becomes one WARNING line
    without its traceback; any other record passes as it is.

    FastStream's subscribers log each failed fetch at ERROR with the traceback and retry every
    5 s: while Redis was away, a worker printed a 30-line traceback every 5 s for its control
    subscriber (issue 30). Redis away is expected, said once per retry, and over soon."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, TRANSIENT):
            record.msg, record.args = (
                "%s: Redis is not reachable (%s); retrying",
                (
                    record.getMessage(),
                    " ".join(str(error).split()) or type(error).__name__,
                ),
            )
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info, record.exc_text = None, None
        return True


_AWAY_IN_ONE_LINE: Final = RedisAwayInOneLine()


def make_broker(settings: Settings, client_name: str = "terminus-worker") -> RedisBroker:
    """The FastStream broker of a worker or gateway process, on one Redis or a cluster; its
    client never re-sends a command by itself (see `no_resends`)."""
    from faststream.redis import RedisBroker  # not for the producer SDK

    from terminus.service.redis.cluster_broker import TlsClusterBroker

    kind = TlsClusterBroker if settings.redis_cluster else RedisBroker
    log.addFilter(_AWAY_IN_ONE_LINE)  # once: a logger keeps one copy of a filter
    return kind(
        url_of(settings),
        client_name=client_name,
        retry=no_resends(),
        **client_options(settings),
        description="terminus: trustworthy LLM turns on Redis Streams",
        logger=log,
        log_level=logging.DEBUG,  # per-message logs of the control channel: not worth INFO
    )


def connect(url: str, *, cluster: bool = False, **options: Any) -> Redis:
    """A client of the Redis at `url`, or of the cluster one of whose nodes `url` names."""
    if cluster:
        return cast(Redis, RedisCluster.from_url(url, **options))
    return Redis.from_url(url, **options)


def client(settings: Settings, **options: Any) -> Redis:
    """A client for `settings` (REDIS_URL, else the local default)."""
    return connect(url_of(settings), cluster=settings.redis_cluster, **options)


def url_of(settings: Settings) -> str:
    """The Redis URL to connect to, password included: REDIS_URL, else the local default.
    For a client's constructor only; anything shown to a human goes through `redacted_url`."""
    return settings.redis_url.reveal() if settings.redis_url else embedded.LOCAL_URL


async def refresh_slots(redis: Redis) -> bool:
    """Re-read a cluster's slot map (CLUSTER SLOTS from any reachable node), keeping the
    connection pools of nodes that stay. Whether it worked; on one Redis there is nothing to
    refresh. A failed refresh (no node answers yet) is left to the next connection error."""
    if not isinstance(redis, RedisCluster):
        return True
    try:
        await redis.nodes_manager.initialize()
    except Exception as exc:  # RedisClusterException, or a connection error of the last node
        log.debug("slot map refresh failed: %s", exc)
        return False
    return True


def is_cluster(redis: Redis) -> bool:
    """Whether `redis` is a cluster client: its multi-key reads must stay within one slot."""
    return isinstance(redis, RedisCluster)


async def execute(pipe: Any, *, raise_on_error: bool = True) -> list[Any]:
    """Run a pipeline. redis-py 8.1's cluster pipeline raises AttributeError when a node's
    connection is reset during its handshake (a primary just died): that is a ConnectionError,
    and is raised as one so that callers retry it as any other."""
    try:
        return cast(list[Any], await pipe.execute(raise_on_error=raise_on_error))
    except AttributeError as exc:
        raise ConnectionError(f"connection reset: {exc}") from exc
