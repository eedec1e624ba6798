"""The sink's tables and the statements that write them, for PostgreSQL and SQLite (docs/sinks.md).

One text per statement, written once: the two dialects differ only in the JSON column type
(`JSONB`; SQLite's `TEXT` checked by `json_valid`) and the parameter mark (`%s`; `?`). Both
servers take `INSERT ... ON CONFLICT ... DO UPDATE ... WHERE` and row-value comparisons
(SQLite from 3.24), which is all the version guard needs.

Migrations are a list: entry n creates version n + 1. `terminus_schema` records each version
applied; a sink writes only to the version this build knows.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from terminus.service.sinks.rows import MessageRow, TurnRow


class Dialect(NamedTuple):
    """What differs between the two databases' SQL."""

    name: str
    json: str  # the column type of a JSON value; `{col}` is the column's name
    mark: str  # a parameter placeholder


POSTGRES: Final = Dialect("postgresql", "JSONB", "%s")
SQLITE: Final = Dialect("sqlite", "TEXT CHECK ({col} IS NULL OR json_valid({col}))", "?")

VERSION_TABLE: Final = """CREATE TABLE IF NOT EXISTS terminus_schema (
    version INTEGER PRIMARY KEY,
    applied_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
)"""

_VERSIONED: Final = """
    step BIGINT NOT NULL,
    attempt BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    log_ms BIGINT NOT NULL,
    log_seq BIGINT NOT NULL,
    partition INTEGER NOT NULL,"""

_V1: Final = (
    f"""CREATE TABLE messages (
    session_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,{_VERSIONED}
    body TEXT NOT NULL,
    parts {{json:parts}} NOT NULL,
    finish_reason TEXT NOT NULL,
    usage {{json:usage}} NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    PRIMARY KEY (session_id, message_id)
)""",
    f"""CREATE TABLE turns (
    session_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,{_VERSIONED}
    state TEXT NOT NULL CHECK (state IN ('finished', 'failed', 'cancelled')),
    stop_reason TEXT NOT NULL,
    message_id TEXT,
    error_type TEXT,
    error {{json:error}},
    partial {{json:partial}},
    PRIMARY KEY (session_id, turn_id)
)""",
    """CREATE TABLE sink_positions (
    sink TEXT NOT NULL,
    partition INTEGER NOT NULL,
    epoch BIGINT NOT NULL,
    log_ms BIGINT NOT NULL,
    log_seq BIGINT NOT NULL,
    updated_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (sink, partition)
)""",
    "CREATE INDEX messages_turn ON messages (turn_id)",
)
MIGRATIONS: Final = (_V1,)
SCHEMA_VERSION: Final = len(MIGRATIONS)

_GUARD: Final = (
    "({t}.step, {t}.attempt, {t}.seq, {t}.log_ms, {t}.log_seq)"
    " < (excluded.step, excluded.attempt, excluded.seq, excluded.log_ms, excluded.log_seq)"
)
_MESSAGE_COLUMNS: Final = (*MessageRow._fields[:3], "step", "attempt", "seq", "log_ms", "log_seq")
_MESSAGE_COLUMNS_ALL: Final = (*_MESSAGE_COLUMNS, "partition", *MessageRow._fields[4:])
_TURN_COLUMNS_ALL: Final = (
    *TurnRow._fields[:2],
    *("step", "attempt", "seq", "log_ms", "log_seq", "partition"),
    *TurnRow._fields[3:],
)


def ddl(dialect: Dialect, version: int) -> list[str]:
    """The statements that bring a schema at `version - 1` to `version`."""
    return [_typed(text, dialect) for text in MIGRATIONS[version - 1]]


def _typed(text: str, dialect: Dialect) -> str:
    for col in ("parts", "usage", "error", "partial"):
        text = text.replace(f"{{json:{col}}}", dialect.json.format(col=col))
    return text


def _upsert(dialect: Dialect, table: str, columns: tuple[str, ...], key: tuple[str, str]) -> str:
    marks = ", ".join([dialect.mark] * len(columns))
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in key)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
        f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}"
        f" WHERE {_GUARD.format(t=table)}"
    )


class Statements:
    """Every statement a writer sends, in its dialect's marks."""

    def __init__(self, dialect: Dialect) -> None:
        m = dialect.mark
        self.dialect = dialect
        self.message = _upsert(
            dialect, "messages", _MESSAGE_COLUMNS_ALL, ("session_id", "message_id")
        )
        self.turn = _upsert(dialect, "turns", _TURN_COLUMNS_ALL, ("session_id", "turn_id"))
        self.version = "SELECT max(version) FROM terminus_schema"
        self.record_version = f"INSERT INTO terminus_schema (version) VALUES ({m})"
        self.has_versions = (
            "SELECT count(*) FROM information_schema.tables"
            " WHERE table_schema = current_schema() AND table_name = 'terminus_schema'"
            if dialect is POSTGRES
            else "SELECT count(*) FROM sqlite_master WHERE name = 'terminus_schema'"
        )
        self.open_position = (
            "INSERT INTO sink_positions (sink, partition, epoch, log_ms, log_seq)"
            f" VALUES ({m}, {m}, 0, 0, 0) ON CONFLICT (sink, partition) DO NOTHING"
        )
        # Fencing inside the database: a later epoch takes the row, an earlier one never again.
        self.claim = (
            f"UPDATE sink_positions SET epoch = {m} WHERE sink = {m} AND partition = {m}"
            f" AND epoch <= {m}"
        )
        self.position = (
            "SELECT epoch, log_ms, log_seq FROM sink_positions"
            f" WHERE sink = {m} AND partition = {m}"
        )
        self.positions = f"SELECT partition, log_ms, log_seq FROM sink_positions WHERE sink = {m}"
        # Moves only from where this epoch left it: another writer in between makes it 0 rows.
        self.advance = (
            f"UPDATE sink_positions SET log_ms = {m}, log_seq = {m}, updated_at = CURRENT_TIMESTAMP"
            f" WHERE sink = {m} AND partition = {m} AND epoch = {m}"
            f" AND log_ms = {m} AND log_seq = {m}"
        )


def message_params(row: MessageRow, partition: int) -> tuple[object, ...]:
    v = row.version
    return (*row[:3], v.step, v.attempt, v.seq, v.log_ms, v.log_seq, partition, *row[4:])


def turn_params(row: TurnRow, partition: int) -> tuple[object, ...]:
    v = row.version
    return (*row[:2], v.step, v.attempt, v.seq, v.log_ms, v.log_seq, partition, *row[3:])
