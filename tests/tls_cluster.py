"""A local Redis Cluster that speaks TLS only, signed by a private CA and wanting client
certificates: 3 primaries, no replicas, on free loopback ports (issue 31, item 7).

The nodes are `ClusterNode`s (service/redis/cluster.py) with the TLS directives of
tests/secure_redis.py, and `tls-cluster yes` so that the cluster bus is TLS too. The cluster is
joined with CLUSTER ADDSLOTS and CLUSTER MEET over TLS, not `redis-cli --cluster create`, whose
TLS flags differ between versions.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Final, cast
from urllib.parse import quote, urlencode

import redis
from secure_redis import NO_TLS_SIGNS, Certs, make_certs

from terminus.service.redis.cluster import SLOTS, ClusterNode, LocalCluster

PRIMARIES: Final = 3


class TlsClusterNode(ClusterNode):
    """A cluster node on TLS only (`port` is its tls-port), client certificates required."""

    def __init__(self, data_dir: Path, certs: Certs) -> None:
        self.certs = certs
        super().__init__(data_dir)

    def command(self) -> list[str]:
        certs = self.certs
        return [
            *super().command(),
            *("--port", "0", "--tls-port", str(self.port), "--tls-cluster", "yes"),
            *("--tls-cert-file", str(certs.server_cert), "--tls-key-file", str(certs.server_key)),
            *("--tls-ca-cert-file", str(certs.ca), "--tls-auth-clients", "yes"),
            # On the bus a node is a client of the others: it shows a client certificate.
            *("--tls-client-cert-file", str(certs.client_cert)),
            *("--tls-client-key-file", str(certs.client_key)),
        ]

    def probe(self) -> redis.Redis:
        return redis.Redis(
            port=self.port, socket_timeout=1, socket_connect_timeout=1, **tls_options(self.certs)
        )


def tls_options(certs: Certs) -> dict[str, Any]:
    """redis-py's keyword arguments for a verified TLS connection with a client certificate."""
    return {
        "ssl": True,
        "ssl_ca_certs": str(certs.ca),
        "ssl_certfile": str(certs.client_cert),
        "ssl_keyfile": str(certs.client_key),
    }


class TlsCluster(LocalCluster):
    """`PRIMARIES` TLS nodes joined into one cluster; `url` is what REDIS_URL would say."""

    def __init__(self, data_dir: Path, timeout: float = 30.0) -> None:
        self.certs = make_certs(Path(data_dir).resolve() / "tls")
        super().__init__(data_dir, primaries=PRIMARIES, replicas=0, timeout=timeout)

    def _node(self, data_dir: Path) -> ClusterNode:
        return TlsClusterNode(data_dir, self.certs)

    @property
    def url(self) -> str:
        """`rediss://127.0.0.1:port/0?ssl_ca_certs=...&ssl_certfile=...&ssl_keyfile=...`."""
        options = tls_options(self.certs)
        query = urlencode(
            {k: v for k, v in options.items() if k != "ssl"}, quote_via=quote, safe="/"
        )
        return f"rediss://127.0.0.1:{self.nodes[0].port}/0?{query}"

    def lacks_tls(self) -> bool:
        """Whether redis-server was built without TLS (after a failed start)."""
        logs = (n.log_path.read_text(errors="replace") for n in self.nodes if n.log_path.exists())
        return any(sign in log for log in logs for sign in NO_TLS_SIGNS)

    def _create(self) -> None:
        """Slots shared out by CLUSTER ADDSLOTS and the nodes met by CLUSTER MEET, over TLS."""
        share = SLOTS // PRIMARIES + 1
        for n, node in enumerate(self.nodes):
            with contextlib.closing(node.probe()) as client:
                slots = range(n * share, min(SLOTS, (n + 1) * share))
                cast(Any, client).execute_command("CLUSTER", "ADDSLOTS", *slots)
                for other in self.nodes[n + 1 :]:
                    meet = ("CLUSTER", "MEET", "127.0.0.1", other.port)
                    cast(Any, client).execute_command(*meet)
