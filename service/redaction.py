"""How secrets are kept out of what humans read: every credential of a Redis URL replaced by `***`
wherever it was, and every `token=` of a request line in the gateway's access log.

A query parameter's name is matched decoded: the gateway (Starlette's query parser) decodes
names, so `?%74oken=` is the token parameter to it, and was logged in full while the log matched
`token=` as written (issue 30). The gateway keeps accepting it: percent-encoding an unreserved
character does not change a URL (RFC 3986 sections 2.3 and 6.2.2.2), every URL parser decodes
it, and a proxy in front may have normalized it already, so refusing it would make the answer
depend on the path a request took; what must not depend on the spelling is the mask.

A URL names its credentials in the userinfo (`redis://user:password@host`, or `redis://:password@`
for a password alone) and, for redis-py, in the query (`?password=...`, `?username=...`). Every
banner, log line, error and CLI output that names a Redis renders it through `redacted_url`, so
there is one rule to read and to test. The user name stays: it says which ACL user is in use,
and it is not a secret.

`SecretUrl` holds such a URL in the settings: printed, formatted, logged or encoded, it is the
masked URL (or refused), and only `reveal()`, called where a client is made, gives the password.
"""

from __future__ import annotations

import logging
import re
from typing import Final
from urllib.parse import parse_qsl, unquote_plus, urlencode, urlsplit, urlunsplit

MASK: Final = "***"
SECRET_PARAMS: Final = frozenset({"password", "pass", "pwd", "secret", "token", "auth"})
QUERY_PAIR: Final = re.compile(r"(?:^|(?<=[?&]))([^=&#?\s\"]*)=[^&#\s\"]*")


def redacted_url(url: str) -> str:
    """`url` with its password (userinfo or query) replaced by `***`; never raises. A URL that
    does not split (a broken IPv6 literal) is not shown at all."""
    try:
        parts = urlsplit(url)
        netloc = _redacted_netloc(parts.netloc)
        query = _redacted_query(parts.query)
        shown = urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:  # an invalid port or IPv6 literal: say so without echoing it
        return "<a Redis URL that does not parse>"
    if not netloc and url.startswith(f"{parts.scheme}://"):  # unix:///path keeps its slashes
        shown = shown.replace(f"{parts.scheme}:", f"{parts.scheme}://", 1)
    return shown


class SecretUrl:
    """A URL with credentials that `str`, `repr`, f-strings, `%s` and `%r` in a log line show
    masked (`redacted_url`); msgspec and pickle refuse to encode it (give msgspec `enc_hook=str`
    for the masked text). `reveal()` is the real URL, for the one place that connects."""

    __slots__ = ("_url",)

    def __init__(self, url: str) -> None:
        self._url = url

    def reveal(self) -> str:
        """The URL as given, password included: pass it to a client, never to a printer."""
        return self._url

    def __str__(self) -> str:
        return redacted_url(self._url)

    def __repr__(self) -> str:
        return f"SecretUrl({redacted_url(self._url)!r})"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SecretUrl) and other._url == self._url

    def __hash__(self) -> int:
        return hash((SecretUrl, self._url))

    def __copy__(self) -> SecretUrl:
        return self  # immutable

    def __deepcopy__(self, memo: dict[int, object]) -> SecretUrl:
        return self

    def __reduce__(self) -> str | tuple[object, ...]:
        # A pickle is bytes another process or a file may show; a masked one would connect with
        # "***" as the password. Neither: a process gets its URL from REDIS_URL.
        raise TypeError("a SecretUrl is not pickled: give the process REDIS_URL")


def _redacted_netloc(netloc: str) -> str:
    userinfo, at, host = netloc.rpartition("@")
    if not at:
        return netloc
    user, colon, _ = userinfo.partition(":")
    # `redis://name@host` is a user name to redis-py, not a password: shown as it is.
    return f"{user}:{MASK}@{host}" if colon else netloc


def _redacted_query(query: str) -> str:
    if not query:
        return query
    pairs = parse_qsl(query, keep_blank_values=True)
    shown = [(k, MASK if k.lower() in SECRET_PARAMS else v) for k, v in pairs]
    return urlencode(shown, safe="*/:")


def redacted_tokens(text: str) -> str:
    """`text` with the value of every `token` query parameter replaced by `***`, its name
    written in any case and any percent-encoding (`%74oken=`, `tok%65n=`, `TOKEN=`)."""
    return QUERY_PAIR.sub(_masked_if_token, text)


def _masked_if_token(pair: re.Match[str]) -> str:
    name = pair[1]
    return f"{name}={MASK}" if _decoded(name).lower() == "token" else pair[0]


def _decoded(name: str) -> str:
    """`name` percent-decoded (and `+` as a space) until nothing changes: the gateway reads a
    name decoded once, and a log should hide what any decoder would read as a token."""
    while (decoded := unquote_plus(name)) != name:
        name = decoded
    return name


class RedactTokens(logging.Filter):
    """Rewrites a log record's message and arguments so that no `token=` value is logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                redacted_tokens(a) if isinstance(a, str) else a for a in record.args
            )
        if isinstance(record.msg, str):
            record.msg = redacted_tokens(record.msg)
        return True
