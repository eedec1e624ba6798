"""FastStream's Redis Cluster broker, with every TLS option of `REDIS_URL` on all its connections.

FastStream 0.7.8's `RedisClusterBroker` keeps two clients: an asyncio `RedisCluster` for
commands, built from every option of the URL, and a blocking `redis.cluster.RedisCluster` for
pub/sub (the control channel), built with `ssl=True`, the user and the password only. The second
dropped `ssl_ca_certs`, `ssl_certfile` and `ssl_keyfile`, so a worker could not start on a TLS
cluster signed by a private CA (`CERTIFICATE_VERIFY_FAILED`) or wanting client certificates
(issue 31). `TlsClusterBroker` builds that blocking client with the same options as the first:
the URL's `ssl_*` query parameters, as on one Redis, where redis-py reads them all.

It replaces one method of FastStream's connection state (`_get_sync_cluster`) and reads its
attributes; `tests/integration/test_tls_cluster.py` starts a worker on a TLS cluster that
requires client certificates, so a FastStream upgrade that moves them fails there.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from faststream.redis import RedisClusterBroker
from faststream.redis.configs.state import RedisClusterConnectionState
from redis.cluster import ClusterNode
from redis.cluster import RedisCluster as BlockingCluster

# What the blocking client takes from the options FastStream parsed out of the URL, besides every
# `ssl_*` option (redis-py's names: ssl_ca_certs, ssl_certfile, ssl_keyfile, ssl_cert_reqs, ...).
SHARED: Final = ("username", "password", "ssl", "socket_timeout", "socket_connect_timeout")
PUBSUB_THREADS: Final = 4  # as FastStream's own
_node: Callable[[str, int], ClusterNode] = ClusterNode  # redis-py leaves its __init__ untyped


class _ClusterState(RedisClusterConnectionState):
    """FastStream's cluster connection state whose pub/sub client keeps the TLS options."""

    __slots__ = ()

    def _get_sync_cluster(self) -> Any:
        if self._sync_cluster is not None or not self._connected:
            return super()._get_sync_cluster()
        self._sync_cluster = BlockingCluster(
            startup_nodes=startup_nodes(self._options), **blocking_options(self._options)
        )
        self._thread_pool = ThreadPoolExecutor(max_workers=PUBSUB_THREADS)
        return self._sync_cluster


class TlsClusterBroker(RedisClusterBroker):
    """`RedisClusterBroker` whose every connection has the URL's TLS options."""

    def _make_connection_state(
        self, connection_options: dict[str, Any], kwargs: dict[str, Any]
    ) -> _ClusterState:
        return _ClusterState(connection_options)


def blocking_options(options: dict[str, Any]) -> dict[str, Any]:
    """The options of the blocking pub/sub client: credentials, timeouts and every `ssl_*`."""
    kept = {k: v for k, v in options.items() if k in SHARED or k.startswith("ssl_")}
    return {k: v for k, v in kept.items() if v is not None}


def startup_nodes(options: dict[str, Any]) -> list[ClusterNode]:
    """The nodes FastStream was given (the URL's host), as the blocking client wants them."""
    nodes = [_node(n.host, n.port) for n in options.get("startup_nodes", [])]
    return nodes or [_node(options.get("host", "127.0.0.1"), int(options.get("port", 6379)))]
