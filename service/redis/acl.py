"""Redis refusing the service's ACL user a command, a key or a channel, read from its error.

A refusal is not the caller's fault and not Redis being away: the deployment's ACL lacks a grant
(docs/security.md gives the user's line). The gateway answers it 503 (service unavailable until
an operator acts) and logs one line that names what to grant, at most once a minute per refusal,
so that a route asked a thousand times does not print a thousand tracebacks.

Redis words a refusal two ways: a command sent directly fails with `NOPERM` (redis-py's
`NoPermissionError`), naming the command; a command a Lua script sends fails the script with a
plain error that does not name it ("The user executing the script can't run this command").
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Final, NamedTuple
from urllib.parse import parse_qs, unquote, urlsplit

from redis.exceptions import NoPermissionError, ResponseError

log = logging.getLogger("terminus.acl")

QUIET_S: Final = 60.0  # the same refusal is logged again after this long
_COMMAND: Final = re.compile(r"permissions to run the '([^']+)' command")
_SCRIPT: Final = re.compile(r"user executing the script can't (run|access)")
# The data-type category of each command terminus sends (COMMAND INFO's acl_categories, Redis
# 7.0; tests/integration/test_gateway_acl.py checks them against the running server): what a
# `-@stream` or a missing `+@sortedset` took away. Redis 6.2 files a few commands elsewhere
# (`SINCE_7`); the grant a refusal names is the command itself, right on either.
CATEGORIES: Final = {
    **dict.fromkeys(["ping", "client|setname", "client|setinfo", "wait"], "@connection"),
    **dict.fromkeys(["evalsha", "script|load"], "@scripting"),
    **dict.fromkeys(
        ["xadd", "xread", "xreadgroup", "xrange", "xrevrange", "xlen", "xack", "xpending"],
        "@stream",
    ),
    **dict.fromkeys(["xautoclaim", "xtrim", "xgroup|create", "xinfo|groups"], "@stream"),
    **dict.fromkeys(["get", "mget", "set", "incr", "append"], "@string"),
    **dict.fromkeys(["pexpire", "del", "unlink", "type", "scan"], "@keyspace"),
    **dict.fromkeys(["hget", "hmget", "hgetall", "hset", "hdel", "hincrby"], "@hash"),
    **dict.fromkeys(["multi", "exec"], "@transaction"),
    **dict.fromkeys(
        ["zadd", "zrange", "zrangebyscore", "zrevrangebyscore", "zrem", "zremrangebyscore"],
        "@sortedset",
    ),
    **dict.fromkeys(["publish", "subscribe", "unsubscribe"], "@pubsub"),
}
# Commands whose category Redis 7.0 changed: 6.2 files WAIT under @keyspace.
SINCE_7: Final = {"wait": "@keyspace"}


class Refusal(NamedTuple):
    """What Redis refused: a command (and its category, when known), or a key or channel."""

    command: str | None
    category: str | None
    detail: str  # Redis's own words

    def grant(self) -> str:
        """What the ACL user needs, in ACL SETUSER's words."""
        if self.command is not None:
            within = f" (category {self.category})" if self.category else ""
            return f"the command '{self.command}'{within}: grant +{self.command}"
        if "key" in self.detail:  # Redis 7.0: "one of the keys"; 7.2: "a key"
            return "a key outside its key patterns: grant ~<prefix>:*"
        if "channel" in self.detail:
            return "a channel outside its patterns: grant &<prefix>:control"
        return "a command one of its scripts sends: compare its ACL line with docs/security.md"


def refusal(exc: BaseException) -> Refusal | None:
    """The refusal `exc` reports, or None if it is another error."""
    if not isinstance(exc, ResponseError):
        return None
    detail = " ".join(str(exc).split())
    if isinstance(exc, NoPermissionError):
        found = _COMMAND.search(detail)
        command = found[1].lower() if found else None
        return Refusal(command, CATEGORIES.get(command or ""), detail)
    if _SCRIPT.search(detail):
        return Refusal(None, None, detail)
    return None


def user_of(url: str | None) -> str | None:
    """The ACL user a Redis URL signs in as (its userinfo, or redis-py's `?username=`); None
    for the default user. Never the password."""
    try:
        parts = urlsplit(url or "")
    except ValueError:
        return None
    named = parse_qs(parts.query).get("username", [])
    return unquote(parts.username) if parts.username else (named[0] if named else None)


class Alarm:
    """Logs each distinct refusal at most once every `QUIET_S` seconds."""

    def __init__(self, user: str | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.who = f"the ACL user '{user or 'default'}'"
        self.clock = clock
        self.last: dict[Refusal, float] = {}

    def report(self, found: Refusal, where: str) -> None:
        now = self.clock()
        if now - self.last.get(found, -QUIET_S) < QUIET_S:
            return
        self.last[found] = now
        log.error(
            "Redis refused %s %s (%s: %s); answered 503 until the ACL is fixed",
            self.who,
            found.grant(),
            where,
            found.detail,
        )
