"""A private redis-server as a deployment should run it: TLS only, and ACL users (issue 21).

The gate's TLS + ACL pass (`TERMINUS_TEST_REDIS_TLS=1`, tests/conftest.py) runs the integration
tier on one of these. There is no plain-TCP port, a client must show a certificate of the test
CA, the default user is off, and the service's user `terminus` holds only the least privilege
that docs/security.md documents: the commands terminus sends (directly or from its Lua scripts,
which Redis checks against the caller's ACL too), keys under the test run's root, and the control
channel. Everything the service does runs as that user: anything it sends beyond that list fails
the run with a NOPERM error instead of slipping by. The `admin` user is only for a test's own
setup and checks that no service code path needs (SCRIPT FLUSH, ACL, INFO, EXISTS, XCLAIM...).

Certificates are made with `cryptography` (EC P-256, valid for a day, the server's for 127.0.0.1
and localhost) rather than the openssl CLI: no version-dependent command-line flags, no child
processes. The server requires a client certificate (`tls-auth-clients yes`, Redis's default when
TLS is on), so the run also proves that the certificate and key named in REDIS_URL reach the TLS
handshake of every client terminus makes, redis-py's and FastStream's alike.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import re
import secrets
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Self
from urllib.parse import quote, urlencode

import redis
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from terminus.service.redis.embedded import EmbeddedRedis, EmbeddedRedisError

SERVICE_USER: Final = "terminus"
ADMIN_USER: Final = "admin"
# Every prefix of a test run starts with this (the `prefix` fixture's `t-<hex>`, and replay's
# `<prefix>-replay` beside it), so the run's key and channel patterns still fence something.
TEST_ROOT: Final = "t-"

# What terminus sends, grouped as docs/security.md explains them; tests/unit/
# test_redis_acl_doc.py checks that the documented ACL line grants exactly these.
SERVICE_COMMANDS: Final = (
    # connections: health checks and /healthz; FastStream names its connections
    *["ping", "client|setname"],
    # the Lua scripts (service/redis/lua), loaded again after a restart or SCRIPT FLUSH
    *["evalsha", "script|load"],
    # streams: inbound logs, session frames, commands, transitions, dead letters
    *["xadd", "xread", "xreadgroup", "xrange", "xrevrange", "xlen", "xack", "xpending"],
    *["xautoclaim", "xtrim", "xgroup|create", "xinfo|groups"],
    # strings: snapshots, tails, leases, epochs
    *["get", "mget", "set", "incr", "append", "pexpire", "del", "unlink", "type"],
    # hashes: messages, partials, metrics; a worker stores its own metrics and their TTL in one
    # MULTI (service/metrics/worker.py)
    *["hget", "hmget", "hgetall", "hset", "hdel", "hincrby", "multi", "exec"],
    # sorted sets: open turns, workers, archive bookkeeping, message order
    *["zadd", "zrange", "zrangebyscore", "zrevrangebyscore", "zrem", "zremrangebyscore"],
    # the control channel: rebalance nudges between workers
    *["publish", "subscribe", "unsubscribe"],
    # the server's clock (stall deadlines, heartbeats, retention) and commits waiting for replicas
    *["time", "wait"],
    # `terminus replay`: clearing and listing its target prefix
    "scan",
)

# From Redis 7.2 on, redis-py announces itself on every new connection (CLIENT SETINFO); refused, it
# goes on, but each refusal is an ACL LOG entry. Older servers reject the rule itself.
SETINFO: Final = "client|setinfo"
SETINFO_SINCE: Final = (7, 2)

# Redis's own signs of a build without TLS: up to 7.0 the tls-* directives do not exist, from
# 7.2 on the TLS connection type is missing.
NO_TLS_SIGNS: Final = ("Failed finding TLS support", ">>> 'tls-port")


def service_rules(
    keys: Sequence[str], channels: Sequence[str], version: tuple[int, int] = (7, 0)
) -> list[str]:
    """ACL rules of the service's user on a Redis of `version`: only `keys` and `channels` (glob
    patterns), only the commands terminus sends. `reset*` first: Redis 6.2 grants every channel
    by default."""
    setinfo = [SETINFO] if version >= SETINFO_SINCE else []
    return [
        "resetkeys",
        *(f"~{pattern}" for pattern in keys),
        "resetchannels",
        *(f"&{pattern}" for pattern in channels),
        "-@all",
        *(f"+{command}" for command in [*SERVICE_COMMANDS, *setinfo]),
    ]


def producer_rules(prefix: str, partitions: int) -> list[str]:
    """A producer's user (service/sdk/producer.py): XADD to the inbound logs and nothing else, each
    log named exactly (a `*` could also match a session stream whose id ends in "}:in"), and
    HMGET of the deployment's shape (service/shape.py), which the pool records."""
    logs = [f"~{prefix}:{{{p}}}:in" for p in range(partitions)]
    shape = f"~{prefix}:shape"
    return ["resetkeys", *logs, shape, "resetchannels", "-@all", "+ping", "+xadd", "+hmget"]


def reader_rules(prefix: str) -> list[str]:
    """A subscriber's user reading over Redis (`RedisSource`, service/sdk/subscriber.py): XREAD of
    the session streams, the only streams under `:session:`, and HMGET of the deployment's shape."""
    keys = [f"~{prefix}:{{*}}:session:*", f"~{prefix}:shape"]
    return ["resetkeys", *keys, "resetchannels", "-@all", "+ping", "+xread", "+hmget"]


def server_version(binary: str) -> tuple[int, int]:
    """(major, minor) of a redis-server binary, from `--version` ("Redis server v=7.0.15 ...")."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout
    found = re.search(r"v=(\d+)\.(\d+)", out)
    if found is None:
        raise EmbeddedRedisError(f"cannot read the version of {binary}: {out!r}")
    return int(found[1]), int(found[2])


@dataclass(frozen=True)
class Certs:
    """PEM files: a test CA, the server's certificate and key, a client's certificate and key."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(
    subject: str, issuer: x509.Name, key: ec.EllipticCurvePrivateKey
) -> x509.CertificateBuilder:
    """A certificate valid from five minutes ago (clock skew) for a day: one test session."""
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )


def _write(path: Path, *pem: bytes) -> Path:
    path.write_bytes(b"".join(pem))
    path.chmod(0o600)
    return path


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _ca(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _builder("terminus test CA", _name("terminus test CA"), key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key, _write(directory / "ca.crt", _cert_pem(cert))


def _leaf(
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    subject: str,
    usage: x509.ObjectIdentifier,
    names: list[x509.GeneralName],
) -> tuple[bytes, bytes]:
    """A certificate signed by `ca` for one use (server or client), and its key, as PEM."""
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        _builder(subject, ca_cert.subject, key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return _cert_pem(builder.sign(ca_key, hashes.SHA256())), _key_pem(key)


def make_certs(directory: Path) -> Certs:
    """A fresh CA and the two certificates it signs, written into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key, ca_path = _ca(directory)
    loopback: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.DNSName("localhost"),
    ]
    server = _leaf((ca_cert, ca_key), "127.0.0.1", ExtendedKeyUsageOID.SERVER_AUTH, loopback)
    client = _leaf((ca_cert, ca_key), SERVICE_USER, ExtendedKeyUsageOID.CLIENT_AUTH, [])
    return Certs(
        ca=ca_path,
        server_cert=_write(directory / "server.crt", server[0]),
        server_key=_write(directory / "server.key", server[1]),
        client_cert=_write(directory / "client.crt", client[0]),
        client_key=_write(directory / "client.key", client[1]),
    )


def _acl_user(name: str, password: str, rules: Sequence[str]) -> str:
    """An ACL file line; the password is stored as its SHA-256, never in clear."""
    digest = hashlib.sha256(password.encode()).hexdigest()
    return " ".join(["user", name, "on", f"#{digest}", *rules])


class SecureRedis(EmbeddedRedis):
    """A private redis-server listening on TLS only (`port` is its tls-port), with ACL users."""

    def __init__(self, data_dir: Path, *, binary: str | None = None) -> None:
        super().__init__(data_dir, binary=binary)
        self.certs = make_certs(self.data_dir / "tls")
        self.passwords = {
            SERVICE_USER: secrets.token_urlsafe(24),
            ADMIN_USER: secrets.token_urlsafe(24),
        }
        self.acl_file = self.data_dir / "users.acl"

    def _write_acl(self) -> None:
        patterns = [f"{TEST_ROOT}*"], [f"{TEST_ROOT}*:control"]
        rules = service_rules(*patterns, server_version(self.binary))
        lines = [
            "user default off",
            _acl_user(ADMIN_USER, self.passwords[ADMIN_USER], ["~*", "&*", "+@all"]),
            _acl_user(SERVICE_USER, self.passwords[SERVICE_USER], rules),
        ]
        _write(self.acl_file, "\n".join([*lines, ""]).encode())

    def command(self) -> list[str]:
        """The embedded server's command with TLS and ACL added; a directive given twice takes
        its last value, so `--port 0` closes the plain port."""
        certs = self.certs
        return [
            *super().command(),
            *("--port", "0", "--tls-port", str(self.port)),
            *("--tls-cert-file", str(certs.server_cert), "--tls-key-file", str(certs.server_key)),
            *("--tls-ca-cert-file", str(certs.ca), "--tls-auth-clients", "yes"),
            *("--aclfile", str(self.acl_file)),
        ]

    def start(self) -> Self:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._write_acl()
        super().start()
        return self

    def user_url(self, user: str) -> str:
        """`rediss://user:password@127.0.0.1:port/0?ssl_ca_certs=...`: the form of REDIS_URL that
        docs/security.md gives, CA and client certificate in the query."""
        return tls_url(self.port, self.certs, user, self.passwords[user])

    @property
    def url(self) -> str:
        """The service user's URL: what the tests and every terminus command they run use."""
        return self.user_url(SERVICE_USER)

    @property
    def admin_url(self) -> str:
        return self.user_url(ADMIN_USER)

    def probe(self) -> redis.Redis:
        """The readiness check's client: over TLS, as the admin, who alone may run INFO."""
        return redis.Redis.from_url(self.admin_url, socket_timeout=1, socket_connect_timeout=1)

    def denials(self) -> list[str]:
        """What Redis refused the service's user since the last call (its ACL LOG), then the log
        cleared: the service logs and retries some errors, and a refusal must not pass unseen."""
        with redis.Redis.from_url(self.admin_url) as admin:
            entries = admin.acl_log()
            admin.acl_log_reset()
        return [
            f"{entry['reason']} {entry['object']!r} ({entry['context']}), {entry['count']} times"
            for entry in entries
            if entry["username"] == SERVICE_USER
        ]

    def lacks_tls(self) -> bool:
        """Whether the server's log says that its build has no TLS (after a failed start)."""
        try:
            log = self.log_path.read_text(errors="replace")
        except OSError:
            return False
        return any(sign in log for sign in NO_TLS_SIGNS)


def tls_url(port: int, certs: Certs, user: str, password: str) -> str:
    """A `rediss://` URL that redis-py's and FastStream's `from_url` turn into a verified TLS
    connection with a client certificate (paths percent-encoded, as query values are decoded)."""
    query = urlencode(
        {
            "ssl_ca_certs": certs.ca,
            "ssl_certfile": certs.client_cert,
            "ssl_keyfile": certs.client_key,
        },
        quote_via=quote,
        safe="/",
    )
    userinfo = f"{quote(user, safe='')}:{quote(password, safe='')}"
    return f"rediss://{userinfo}@127.0.0.1:{port}/0?{query}"
