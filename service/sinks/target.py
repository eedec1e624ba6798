"""Which database `--to` names, and a new session on it for each partition a sink follows."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from terminus.service.redaction import redacted_url
from terminus.service.sinks import TargetError

if TYPE_CHECKING:
    from terminus.service.sinks.transact import Session

SQLITE_SCHEME: Final = "sqlite:///"
POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")
WANTED: Final = "postgresql://USER@HOST/DB or sqlite:///PATH (four slashes for an absolute path)"


class Target:
    """A database a sink writes to; `session()` opens nothing until the session is used."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.session: Callable[[], Session] = _factory(url)

    def __str__(self) -> str:
        return redacted_url(self.url)


def _factory(url: str) -> Callable[[], Session]:
    if url.startswith(SQLITE_SCHEME):
        path = url[len(SQLITE_SCHEME) :]
        if not path:
            raise TargetError(f"{url!r} names no file: {WANTED}")
        from terminus.service.sinks.sqlite import SqliteSession

        return lambda: SqliteSession(path)
    if url.startswith(POSTGRES_SCHEMES):
        try:
            from terminus.service.sinks.postgres import PostgresSession
        except ImportError:
            raise TargetError("PostgreSQL needs psycopg: pip install 'terminus[sink]'") from None
        return lambda: PostgresSession(url)
    raise TargetError(f"{redacted_url(url)!r} is no database a sink can write: {WANTED}")
