"""Sinks: the proven messages and the ends of turns, written into a team's own database.

Order of work, and why (docs/sinks.md):

1. A sink follows one partition under a lease of its own namespace (`keys.sink_prefix`), as a
   worker owns one, so several sink processes share the partitions and one holds each.
2. It reads what the workers committed, the archive and then the live log up to the group's
   horizon (an entry pending or not yet delivered is not committed: it may still be
   dead-lettered for its delivery count), and folds it with the workers' own fold. No new
   stream is written by the workers, and a database added later gets the whole history the way
   `terminus replay` rebuilds it.
3. The outputs of each applied event become rows (`rows.py`, pure): a message upserted by
   (session_id, message_id) only if its version (step, attempt, seq of the event that sealed
   it) is higher than the stored one, and each final turn with its state and typed error.
4. One database transaction per page writes the rows and moves the partition's position, but
   only from the position this sink read at its epoch and only if no later epoch wrote: the
   position is the fencing token inside the database, so a sink that lost its lease, or a
   second one racing it, writes nothing. The fold reruns from the start on every takeover and
   writes only what lies after the stored position: effectively once on top of at-least-once.
5. A row the database refuses is dead-lettered (the sink's own stream) with the database's
   reason, and the page is written without it.

Errors:

    SinkError (TerminusError)
     +-- TargetError (ValueError)    `--to` names no database this build can write
     +-- SchemaError                 the database's schema is missing or of another version
     +-- Fenced                      another sink (or a later epoch) moved the position
"""

from __future__ import annotations

from terminus.service import TerminusError


class SinkError(TerminusError):
    """Root of the sinks' errors."""


class TargetError(SinkError, ValueError):
    """The `--to` URL names no database a sink can write; the message says what it wants."""


class SchemaError(SinkError):
    """The schema is missing or not this build's: run `terminus sink migrate`."""

    def __init__(self, found: int | None, wanted: int) -> None:
        state = "no terminus schema" if found is None else f"schema version {found}"
        super().__init__(
            f"{state}, this build writes version {wanted}: run `terminus sink migrate`"
        )
        self.found = found
        self.wanted = wanted


class Fenced(SinkError):
    """The position of `partition` is no longer where this sink left it at its epoch."""

    def __init__(self, sink: str, partition: int, epoch: int) -> None:
        super().__init__(f"sink {sink!r}: partition {partition} moved on without epoch {epoch}")
        self.sink = sink
        self.partition = partition
        self.epoch = epoch
