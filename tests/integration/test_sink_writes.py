"""The sink's transaction on each database (service/sinks/transact.py), one contract run against
SQLite and PostgreSQL: a stale version never wins, a fenced epoch writes nothing, a page sent
again after a lost answer is not written twice, and a refused row is handed over with the
database's reason while the rest of the page commits."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from terminus.service.sinks import Fenced
from terminus.service.sinks.rows import MessageRow, TurnRow, Version
from terminus.service.sinks.target import Target
from terminus.service.sinks.transact import Refusal, Session, Unit, claim, migrate, write_unit
from tests.support.sinks import database, query

__all__ = ["database"]  # the fixture, imported to be used here
SINK = "default"


@pytest.fixture
async def session(database: str) -> AsyncIterator[Session]:
    opened = Target(database).session()
    await migrate(opened)
    try:
        yield opened
    finally:
        await opened.close()


def message(text: str, version: Version) -> MessageRow:
    body = f'{{"message_id":"m","text":"{text}"}}'
    return MessageRow("s", "m", "t", version, body, "[]", "stop", "{}", "p", "model")


def turn(state: str, version: Version) -> TurnRow:
    return TurnRow("s", "t", version, state, "end_turn", "m", None, None, None)


def unit(epoch: int, after: str, position: str, *rows: MessageRow | TurnRow) -> Unit:
    return Unit(SINK, 0, epoch, after, position, rows)


async def nothing_refused(refusals: list[Refusal]) -> None:
    raise AssertionError(f"refused: {refusals}")


async def test_a_stale_version_never_overwrites_a_newer_one(
    session: Session, database: str
) -> None:
    assert await claim(session, SINK, 0, 1) == "0-0"
    newer = message("newer", Version(2, 1, 4, 20, 0))
    older = message("older", Version(1, 1, 9, 30, 0))  # later in no order that counts

    assert await write_unit(session, unit(1, "0-0", "20-0", newer), nothing_refused) == 1
    assert await write_unit(session, unit(1, "20-0", "30-0", older), nothing_refused) == 0

    assert query(database, "SELECT body, step FROM messages") == [(newer.body, 2)]
    assert query(database, "SELECT log_ms FROM sink_positions") == [(30,)]


async def test_a_sink_fenced_by_a_later_epoch_writes_nothing(
    session: Session, database: str
) -> None:
    await claim(session, SINK, 0, 1)
    await claim(session, SINK, 0, 2)  # another sink took the partition

    with pytest.raises(Fenced):
        await write_unit(
            session, unit(1, "0-0", "5-0", message("late", Version(1, 1, 1, 5, 0))), nothing_refused
        )
    with pytest.raises(Fenced):
        await claim(session, SINK, 0, 1)

    assert query(database, "SELECT count(*) FROM messages") == [(0,)]
    assert query(database, "SELECT epoch, log_ms FROM sink_positions") == [(2, 0)]


async def test_a_page_sent_again_after_its_commit_is_not_written_twice(
    session: Session, database: str
) -> None:
    await claim(session, SINK, 0, 3)
    page = unit(
        3,
        "0-0",
        "7-1",
        message("once", Version(1, 1, 5, 7, 1)),
        turn("finished", Version(1, 1, 5, 7, 1)),
    )

    assert await write_unit(session, page, nothing_refused) == 2
    assert await write_unit(session, page, nothing_refused) == 0  # its answer was lost

    assert query(database, "SELECT count(*) FROM messages") == [(1,)]
    assert query(database, "SELECT count(*) FROM turns") == [(1,)]
    with pytest.raises(Fenced):  # a position this epoch never left is someone else's
        await write_unit(session, unit(3, "0-0", "8-0"), nothing_refused)


async def test_a_refused_row_is_handed_over_and_the_rest_of_the_page_commits(
    session: Session, database: str
) -> None:
    await claim(session, SINK, 0, 1)
    refused: list[Refusal] = []

    async def collect(refusals: list[Refusal]) -> None:
        assert query(database, "SELECT count(*) FROM messages") == [(0,)]  # before the commit
        refused.extend(refusals)

    bad = turn("exploded", Version(1, 1, 5, 9, 0))  # no such final state: a CHECK refuses it
    good = message("kept", Version(1, 1, 5, 9, 0))
    stored = await write_unit(session, unit(1, "0-0", "9-0", bad, good), collect)

    assert stored == 1
    assert [r.row for r in refused] == [bad]
    assert "check" in refused[0].reason.lower()
    assert query(database, "SELECT body FROM messages") == [(good.body,)]
    assert query(database, "SELECT count(*) FROM turns") == [(0,)]
    assert query(database, "SELECT log_ms FROM sink_positions") == [(9,)]


async def test_migrate_creates_the_schema_once_and_records_its_version(
    session: Session, database: str
) -> None:
    assert await migrate(session) == (1, 1)  # the fixture migrated it already

    assert query(database, "SELECT version FROM terminus_schema") == [(1,)]
