"""One page of rows and the position after it, in one database transaction, for any driver.

The whole page is tried first. If the database refuses a row (a constraint, a value it cannot
store), the transaction is rolled back and the page written again with each row under its own
savepoint: a refused row is rolled back alone, handed to `refused` (which dead-letters it)
before the commit, and the rest of the page and the position commit together. Dead-lettering
before the commit means a crash between the two writes a dead letter twice, never loses one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple, Protocol

from terminus.service.sinks import Fenced, SchemaError, SinkError
from terminus.service.sinks.rows import MessageRow, Row
from terminus.service.sinks.schema import (
    SCHEMA_VERSION,
    VERSION_TABLE,
    Statements,
    ddl,
    message_params,
    turn_params,
)

START = "0-0"


class Unit(NamedTuple):
    """What one transaction writes: `rows`, and the position moved from `after` to `position`."""

    sink: str
    partition: int
    epoch: int
    after: str
    position: str
    rows: Sequence[Row]


class Refusal(NamedTuple):
    """A row the database would not store, and its words for why."""

    row: Row
    reason: str


Refused = Callable[[list[Refusal]], Awaitable[None]]


class DatabaseAway(SinkError):
    """The database cannot be reached or gave up on the transaction: retry the same page."""


class Refusing(SinkError):
    """The database refused one statement (a driver's data or integrity error)."""


class Session(Protocol):
    """A connection as the page's transaction uses it; drivers raise `Refusing` for a refused
    statement and `DatabaseAway` for a lost connection."""

    statements: Statements

    async def begin(self) -> None: ...
    async def execute(self, sql: str, params: Sequence[object]) -> int: ...
    async def fetchone(self, sql: str, params: Sequence[object]) -> tuple[object, ...] | None: ...
    async def fetchall(self, sql: str, params: Sequence[object]) -> list[tuple[object, ...]]: ...
    async def commit(self) -> None: ...
    async def rollback(self) -> None: ...
    async def close(self) -> None: ...


def split(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


async def write_unit(session: Session, unit: Unit, refused: Refused) -> int:
    """Write `unit` in one transaction; returns how many rows were stored (refused ones not
    counted). `Fenced` if the position is not where this epoch left it."""
    try:
        return await _attempt(session, unit, None)
    except Refusing:
        await session.rollback()
    refusals: list[Refusal] = []
    try:
        return await _attempt(session, unit, refusals, refused)
    except BaseException:
        await session.rollback()
        raise


async def _attempt(
    session: Session, unit: Unit, refusals: list[Refusal] | None, refused: Refused | None = None
) -> int:
    await session.begin()
    try:
        if not await _advance(session, unit):
            await session.rollback()
            return 0
        stored = 0
        for n, row in enumerate(unit.rows):
            stored += await _row(session, unit.partition, row, n, refusals)
        if refusals and refused is not None:
            await refused(refusals)
        await session.commit()
        return stored
    except Refusing:
        raise
    except BaseException:
        await session.rollback()
        raise


async def _row(
    session: Session, partition: int, row: Row, n: int, refusals: list[Refusal] | None
) -> int:
    s = session.statements
    if isinstance(row, MessageRow):
        sql, params = s.message, message_params(row, partition)
    else:
        sql, params = s.turn, turn_params(row, partition)
    if refusals is None:
        return await session.execute(sql, params)
    await session.execute(f"SAVEPOINT row_{n}", ())
    try:
        stored = await session.execute(sql, params)
    except Refusing as exc:
        await session.execute(f"ROLLBACK TO SAVEPOINT row_{n}", ())
        refusals.append(Refusal(row, str(exc)))
        return 0
    await session.execute(f"RELEASE SAVEPOINT row_{n}", ())
    return stored


async def _advance(session: Session, unit: Unit) -> bool:
    """Move the position; False if this very unit was committed already (an earlier try whose
    commit's answer was lost), `Fenced` if anything else moved it."""
    s = session.statements
    ms, seq = split(unit.position)
    after_ms, after_seq = split(unit.after)
    key = (unit.sink, unit.partition)
    if await session.execute(s.advance, (ms, seq, *key, unit.epoch, after_ms, after_seq)):
        return True
    found = await session.fetchone(s.position, key)
    if found is not None and tuple(found) == (unit.epoch, ms, seq):
        return False
    raise Fenced(unit.sink, unit.partition, unit.epoch)


async def claim(session: Session, sink: str, partition: int, epoch: int) -> str:
    """Take the partition's position row for `epoch` (no earlier epoch writes after this) and
    return the position it holds; `Fenced` if a later epoch holds it."""
    s = session.statements
    await session.begin()
    try:
        await session.execute(s.open_position, (sink, partition))
        if not await session.execute(s.claim, (epoch, sink, partition, epoch)):
            raise Fenced(sink, partition, epoch)
        found = await session.fetchone(s.position, (sink, partition))
        await session.commit()
    except BaseException:
        await session.rollback()
        raise
    assert found is not None
    return f"{found[1]}-{found[2]}"


async def positions(session: Session, sink: str) -> dict[int, str]:
    """Every partition's position of `sink`, as an entry id."""
    found = await session.fetchall(session.statements.positions, (sink,))
    return {int(str(p)): f"{ms}-{seq}" for p, ms, seq in found}


async def schema_version(session: Session) -> int | None:
    """The newest schema version applied; None if the database has no terminus schema."""
    s = session.statements
    (tables,) = await session.fetchone(s.has_versions, ()) or (0,)
    if not tables:
        return None
    (version,) = await session.fetchone(s.version, ()) or (None,)
    return None if version is None else int(str(version))


async def check_schema(session: Session) -> None:
    """`SchemaError` unless the schema is this build's version."""
    found = await schema_version(session)
    if found != SCHEMA_VERSION:
        raise SchemaError(found, SCHEMA_VERSION)


async def migrate(session: Session) -> tuple[int, int]:
    """Create or upgrade the schema in one transaction; returns (version before, after)."""
    s = session.statements
    await session.begin()
    try:
        await session.execute(VERSION_TABLE, ())
        (found,) = await session.fetchone(s.version, ()) or (None,)
        before = 0 if found is None else int(str(found))
        if before > SCHEMA_VERSION:
            raise SchemaError(before, SCHEMA_VERSION)
        for version in range(before + 1, SCHEMA_VERSION + 1):
            for statement in ddl(s.dialect, version):
                await session.execute(statement, ())
            await session.execute(s.record_version, (version,))
        await session.commit()
    except BaseException:
        await session.rollback()
        raise
    return before, SCHEMA_VERSION
