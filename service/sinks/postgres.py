"""The PostgreSQL driver: psycopg 3's asyncio connection.

Why psycopg 3 rather than asyncpg: it speaks the same `%s` parameters and `ON CONFLICT` text as
the SQLite path's statements (one text per statement, service/sinks/schema.py), adapts Python
values with no codec set-up, and is the driver SQLAlchemy and Django use, so a platform has it
already; asyncpg is faster per row, which a sink writing a few rows per page does not need.
The connection runs in autocommit mode and the page's transaction is spelled out (`BEGIN` ...
`COMMIT`), so the page's shape is the same on both databases. A broken connection is dropped
and opened again on the next page.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from terminus.service.redaction import redacted_url
from terminus.service.sinks.schema import POSTGRES, Statements
from terminus.service.sinks.transact import DatabaseAway, Refusing

CONNECT_TIMEOUT_S = 5


class PostgresSession:
    """One connection to the server `url` names, opened on first use."""

    statements = Statements(POSTGRES)

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: psycopg.AsyncConnection[Any] | None = None

    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is None or self._conn.closed:
            try:
                self._conn = await psycopg.AsyncConnection.connect(
                    self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
                )
            except psycopg.Error as exc:
                raise DatabaseAway(f"{redacted_url(self.url)}: {_line(exc)}") from exc
        return self._conn

    async def _cursor(self, sql: str, params: Sequence[object]) -> psycopg.AsyncCursor[Any]:
        conn = await self._connection()
        try:
            return await conn.execute(sql, tuple(params) or None)
        except (psycopg.DataError, psycopg.IntegrityError) as exc:
            raise Refusing(_line(exc)) from exc
        except psycopg.Error as exc:
            await self._drop()
            raise DatabaseAway(f"{redacted_url(self.url)}: {_line(exc)}") from exc

    async def begin(self) -> None:
        await self._cursor("BEGIN", ())

    async def execute(self, sql: str, params: Sequence[object]) -> int:
        return (await self._cursor(sql, params)).rowcount

    async def fetchone(self, sql: str, params: Sequence[object]) -> tuple[object, ...] | None:
        found = await (await self._cursor(sql, params)).fetchone()
        return None if found is None else tuple(found)

    async def fetchall(self, sql: str, params: Sequence[object]) -> list[tuple[object, ...]]:
        return [tuple(row) for row in await (await self._cursor(sql, params)).fetchall()]

    async def commit(self) -> None:
        await self._cursor("COMMIT", ())

    async def rollback(self) -> None:
        conn = self._conn
        if conn is None or conn.closed:
            return
        try:
            await conn.execute("ROLLBACK")
        except psycopg.Error:
            await self._drop()  # the server went away: the transaction is gone with it

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def close(self) -> None:
        await self._drop()


def _line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
