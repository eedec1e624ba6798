"""Access tokens of the HTTP gateway: HMAC-SHA256 signed, scoped to one session or to operators,
with an expiry (DESIGN section 7).

    v1.<scope>.<expires>.<signature>

`scope` is `s-` + the session id in unpadded base64url, or `admin`; `expires` is Unix seconds;
`signature` is the unpadded base64url HMAC-SHA256 of everything before it, under the deployment's
secret. Tokens carry no other data: a token proves which session (or the operator role) its bearer
may read, until when. Time enters as an argument, so verification is testable without a clock.

The secret comes from `TERMINUS_TOKEN_SECRET`; when it is unset, `local_secret` keeps a random one
in a file beside the embedded Redis data (`./var/token-secret`), so `terminus run` and
`terminus token` on one machine agree without configuration.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import os
import secrets
from pathlib import Path
from typing import Final, NamedTuple

VERSION: Final = "v1"
ADMIN: Final = "admin"
SESSION_PREFIX: Final = "s-"
SECRET_VAR: Final = "TERMINUS_TOKEN_SECRET"
SECRET_FILE: Final = Path("var") / "token-secret"
MIN_SECRET_BYTES: Final = 16


class TokenError(Exception):
    """A token that grants nothing; the message says why (never echoes the token)."""


class Grant(NamedTuple):
    """What a valid token allows: one session's reads, or the operator's (`session` None)."""

    session: str | None
    expires: int

    @property
    def admin(self) -> bool:
        return self.session is None


def mint(secret: bytes, session: str | None, expires: int) -> str:
    """A token for `session` (None: an operator token) valid until Unix time `expires`."""
    scope = ADMIN if session is None else SESSION_PREFIX + _b64(session.encode())
    body = f"{VERSION}.{scope}.{expires}"
    return f"{body}.{_sign(secret, body)}"


def verify(secret: bytes, token: str, now: float) -> Grant:
    """The grant of `token` at Unix time `now`; raises `TokenError` if it is malformed, forged or
    expired."""
    parts = token.split(".")
    # Tokens are ASCII by construction; anything else is refused before it is compared or parsed.
    if not token.isascii() or len(parts) != 4 or parts[0] != VERSION:
        raise TokenError("malformed token")
    _, scope, expires_text, signature = parts
    body = token.rpartition(".")[0]
    if not hmac.compare_digest(signature, _sign(secret, body)):
        raise TokenError("bad signature")
    if not expires_text.isdigit() or len(expires_text) > 12:
        raise TokenError("malformed token")
    expires = int(expires_text)
    if now >= expires:
        raise TokenError("token expired")
    if scope == ADMIN:
        return Grant(None, expires)
    if not scope.startswith(SESSION_PREFIX):
        raise TokenError("malformed token")
    try:
        session = _unb64(scope.removeprefix(SESSION_PREFIX)).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise TokenError("malformed token") from None
    return Grant(session, expires)


def local_secret(env: dict[str, str] | os._Environ[str], path: Path = SECRET_FILE) -> bytes:
    """`TERMINUS_TOKEN_SECRET`, else the secret kept in `path` (created, mode 0600, if absent)."""
    given = env.get(SECRET_VAR)
    if given:
        if len(given.encode()) < MIN_SECRET_BYTES:
            raise TokenError(f"{SECRET_VAR} must be at least {MIN_SECRET_BYTES} bytes")
        return given.encode()
    if not path.exists():
        _create_secret(path)
    secret = path.read_text().strip().encode()
    if len(secret) < MIN_SECRET_BYTES:
        raise TokenError(f"{path} must hold at least {MIN_SECRET_BYTES} bytes of secret")
    return secret


def _create_secret(path: Path) -> None:
    """Write a new secret to `path` unless another process did first. The secret is written whole
    to a file of its own and then linked into place, so no process ever reads `path` half written
    (with O_EXCL on `path` itself, a process that lost the race read an empty key and accepted
    tokens signed with it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(32))
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):  # another process linked its own first
            os.link(staging, path)
    finally:
        staging.unlink(missing_ok=True)


def _sign(secret: bytes, body: str) -> str:
    return _b64(hmac.new(secret, body.encode(), hashlib.sha256).digest())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
