"""The SQLite driver: the standard library's `sqlite3`, each call run in a thread.

Why not aiosqlite: it runs the same `sqlite3` in a thread of its own, one queue hop per
statement; a sink sends a few statements per page, so `asyncio.to_thread` gives the same
behaviour with no dependency. Each sink partition has its own connection; WAL lets readers
(the platform's own) read while a sink writes, and `BEGIN IMMEDIATE` takes the write lock at the
start of the page, so two sinks never deadlock upgrading a read lock (they wait up to the busy
timeout instead).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from typing import Final

from terminus.service.sinks.schema import SQLITE, Statements
from terminus.service.sinks.transact import DatabaseAway, Refusing

BUSY_TIMEOUT_S: Final = 30.0
REFUSED: Final = (sqlite3.IntegrityError, sqlite3.DataError, sqlite3.InterfaceError)


class SqliteSession:
    """One connection to the database file at `path`, opened on first use."""

    statements = Statements(SQLITE)

    def __init__(self, path: str) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            self._conn = conn
        return self._conn

    def _run(
        self, sql: str, params: Sequence[object], rows: bool
    ) -> tuple[int, list[tuple[object, ...]]]:
        try:
            cursor = self._connection().execute(sql, tuple(params))
            return cursor.rowcount, cursor.fetchall() if rows else []
        except REFUSED as exc:
            raise Refusing(str(exc)) from exc
        except sqlite3.Error as exc:
            raise DatabaseAway(f"sqlite {self.path}: {exc}") from exc

    async def _call(
        self, sql: str, params: Sequence[object], rows: bool = False
    ) -> tuple[int, list[tuple[object, ...]]]:
        return await asyncio.to_thread(self._run, sql, params, rows)

    async def begin(self) -> None:
        await self._call("BEGIN IMMEDIATE", ())

    async def execute(self, sql: str, params: Sequence[object]) -> int:
        return (await self._call(sql, params))[0]

    async def fetchone(self, sql: str, params: Sequence[object]) -> tuple[object, ...] | None:
        found = (await self._call(sql, params, rows=True))[1]
        return found[0] if found else None

    async def fetchall(self, sql: str, params: Sequence[object]) -> list[tuple[object, ...]]:
        return (await self._call(sql, params, rows=True))[1]

    async def commit(self) -> None:
        await self._call("COMMIT", ())

    async def rollback(self) -> None:
        conn = self._conn
        if conn is not None and conn.in_transaction:
            await asyncio.to_thread(conn.rollback)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await asyncio.to_thread(conn.close)
