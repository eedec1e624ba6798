"""Access tokens of the HTTP gateway: HMAC-SHA256 signed, scoped to one session or to operators,
with an expiry and the id of the key that signed them (DESIGN section 7, docs/security.md).

    v2.<key id>.<scope>.<expires>.<signature>

`scope` is `s-` + the session id in unpadded base64url, `p-` + it for a producer token (it may
publish into that session, through the producer routes, and read nothing: service/gateway/
producing.py), or `admin`; `expires` is Unix seconds;
`signature` is the unpadded base64url HMAC-SHA256 of everything before it, under the key named by
`key id`. Tokens carry no other data: a token proves which session (or the operator role) its
bearer may read, until when. Time enters as an argument, so verification is testable without a
clock.

Keys (`Keyring`): the first is current and signs new tokens; the others are still accepted, so a
key can be rotated without invalidating every token at once, and retired (removed) to refuse the
tokens it signed before they expire. `TERMINUS_TOKEN_SECRETS="new:SECRET,old:SECRET"` (or
`TERMINUS_TOKEN_KEYS_FILE`, one `id:secret` per line) names them; a single secret
(`TERMINUS_TOKEN_SECRET`) is the key `default`. With none of the three, `local_keyring` reads the
keys file of the state directory (`keystore.py`), made with one random key on first use, so that
`terminus run`, `terminus gateway` and `terminus token` of one user agree wherever they run.
Tokens minted before key ids existed (`v1.<scope>.<expires>.<signature>`) are verified against
every accepted key: they keep working until the secret that signed them is no longer in the ring.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final, NamedTuple

from terminus.service import TerminusError
from terminus.service.gateway.keystore import (
    DEFAULT_KEY_ID,
    StateDirError,
    ensure_keys_file,
    keys_file,
)

VERSION: Final = "v2"
LEGACY: Final = "v1"  # no key id: verified against every accepted key
ADMIN: Final = "admin"
SESSION_PREFIX: Final = "s-"
PRODUCER_PREFIX: Final = "p-"
SECRET_VAR: Final = "TERMINUS_TOKEN_SECRET"
SECRETS_VAR: Final = "TERMINUS_TOKEN_SECRETS"
KEYS_FILE_VAR: Final = "TERMINUS_TOKEN_KEYS_FILE"
MIN_SECRET_BYTES: Final = 16
KEY_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,32}")


class TokenError(TerminusError):
    """A token that grants nothing; the message says why (never echoes the token)."""


class Grant(NamedTuple):
    """What a valid token allows: one session's reads, the operator's (`session` None), or
    publishing into one session as its producer (`producer`), which reads nothing."""

    session: str | None
    expires: int
    producer: bool = False

    @property
    def admin(self) -> bool:
        return self.session is None


class Keyring:
    """The signing keys, by id: the first signs, every one verifies. Its repr shows ids only."""

    def __init__(self, keys: Mapping[str, bytes]) -> None:
        if not keys:
            raise TokenError("no token key given")
        for key_id, secret in keys.items():
            if not KEY_ID.fullmatch(key_id):
                raise TokenError(f"key id {key_id!r} must be 1-32 of A-Z a-z 0-9 _ -")
            if len(secret) < MIN_SECRET_BYTES:
                raise TokenError(f"the secret of key {key_id!r} needs {MIN_SECRET_BYTES} bytes")
        self.keys = dict(keys)
        self.current = next(iter(self.keys))

    @classmethod
    def of(cls, key: bytes | Keyring) -> Keyring:
        """`key` itself, or a single secret as the key `default`."""
        return key if isinstance(key, Keyring) else cls({DEFAULT_KEY_ID: key})

    def __repr__(self) -> str:
        return f"Keyring(current={self.current!r}, ids={list(self.keys)!r})"


def mint(key: bytes | Keyring, session: str | None, expires: int, producer: bool = False) -> str:
    """A token for `session` (None: an operator token; `producer`: its producer's) valid until
    Unix time `expires`, signed with the current key."""
    ring = Keyring.of(key)
    if session is None:
        if producer:
            raise TokenError("a producer token names its session")
        scope = ADMIN
    else:
        prefix = PRODUCER_PREFIX if producer else SESSION_PREFIX
        scope = prefix + _b64(session.encode())
    body = f"{VERSION}.{ring.current}.{scope}.{expires}"
    return f"{body}.{_sign(ring.keys[ring.current], body)}"


def verify(key: bytes | Keyring, token: str, now: float) -> Grant:
    """The grant of `token` at Unix time `now`; raises `TokenError` if it is malformed, forged,
    signed by a key that is not (or no longer) accepted, or expired."""
    ring = Keyring.of(key)
    parts = token.split(".")
    # Tokens are ASCII by construction; anything else is refused before it is compared or parsed.
    if not token.isascii() or not parts:
        raise TokenError("malformed token")
    body, _, signature = token.rpartition(".")
    if parts[0] == VERSION and len(parts) == 5:
        _, key_id, scope, expires_text, _ = parts
        if not KEY_ID.fullmatch(key_id):
            raise TokenError("malformed token")
        if key_id not in ring.keys:
            raise TokenError("unknown or retired key")
        signed = hmac.compare_digest(signature, _sign(ring.keys[key_id], body))
    elif parts[0] == LEGACY and len(parts) == 4:
        _, scope, expires_text, _ = parts
        # Every key is tried, so that no answer says which one signed it.
        matches = [hmac.compare_digest(signature, _sign(s, body)) for s in ring.keys.values()]
        signed = any(matches)
    else:
        raise TokenError("malformed token")
    if not signed:
        raise TokenError("bad signature")
    return _grant(scope, expires_text, now)


def _grant(scope: str, expires_text: str, now: float) -> Grant:
    if not expires_text.isdigit() or len(expires_text) > 12:
        raise TokenError("malformed token")
    expires = int(expires_text)
    if now >= expires:
        raise TokenError("token expired")
    if scope == ADMIN:
        return Grant(None, expires)
    producer = scope.startswith(PRODUCER_PREFIX)
    if not producer and not scope.startswith(SESSION_PREFIX):
        raise TokenError("malformed token")
    try:
        session = _unb64(scope[len(SESSION_PREFIX) :]).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise TokenError("malformed token") from None
    return Grant(session, expires, producer)


def local_keyring(env: Mapping[str, str], announce: Callable[[str], None] | None = None) -> Keyring:
    """The keys: `TERMINUS_TOKEN_SECRETS`, else the file `TERMINUS_TOKEN_KEYS_FILE` names, else
    `TERMINUS_TOKEN_SECRET` as the key `default`, else the state directory's keys file, made
    (and `announce`d, by default on stderr) if absent. Never anything in the working directory."""
    if env.get(SECRETS_VAR):
        return Keyring(_parse_keys(env[SECRETS_VAR].split(","), SECRETS_VAR))
    if env.get(KEYS_FILE_VAR):
        return _read_keys_file(Path(env[KEYS_FILE_VAR]), KEYS_FILE_VAR)
    given = env.get(SECRET_VAR)
    if given:
        if len(given.encode()) < MIN_SECRET_BYTES:
            raise TokenError(f"{SECRET_VAR} must be at least {MIN_SECRET_BYTES} bytes")
        return Keyring.of(given.encode())
    try:
        path = keys_file(env)
    except StateDirError as exc:
        raise TokenError(str(exc)) from None
    ensure_keys_file(path, announce or _to_stderr)
    return _read_keys_file(path, str(path))


def _read_keys_file(path: Path, name: str) -> Keyring:
    """The keys of an `id:secret` file (`#` comments, blank lines skipped), named `name`."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenError(f"{name}: cannot read {path}: {exc}") from None
    kept = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    return Keyring(_parse_keys(kept, str(path)))


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _parse_keys(items: list[str], where: str) -> dict[str, bytes]:
    """`id:secret` items, the current key first; never echoes a secret in an error."""
    keys: dict[str, bytes] = {}
    for n, item in enumerate(items, 1):
        key_id, colon, secret = item.strip().partition(":")
        if not colon:
            raise TokenError(f"{where}: item {n} is not `id:secret`")
        if key_id in keys:
            raise TokenError(f"{where}: key id {key_id!r} is given twice")
        keys[key_id] = secret.strip().encode()
    return keys


def _sign(secret: bytes, body: str) -> str:
    return _b64(hmac.new(secret, body.encode(), hashlib.sha256).digest())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
