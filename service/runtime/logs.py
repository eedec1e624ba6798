"""Log records as text (the default) or as one JSON object per line (TERMINUS_LOG_FORMAT=json).

The JSON form carries the context a record was given with `extra=`: `session_id`, `turn_id`,
`partition`, `worker` and the details of a turn event (`reason`, `type`, ...), so a log pipeline
can follow one turn across workers without parsing messages.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Final, Literal

import msgspec

from terminus.service.metrics.counters import Note

LogFormat = Literal["text", "json"]
TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
CONTEXT: Final = (
    "session_id",
    "turn_id",
    "partition",
    "worker",
    "event",
    "step",
    "attempt",
    "reason",
    "type",
    "stop_reason",
    "provider",
    "model",
    "delay_ms",
    "error",
)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message and the context it was given."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in CONTEXT:
            value = record.__dict__.get(name)
            if value is not None:
                doc[name] = value
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return msgspec.json.encode(doc, enc_hook=str).decode()


def formatter(log_format: LogFormat) -> logging.Formatter:
    return JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)


def level_of(name: str) -> int:
    """A `TERMINUS_LOG_LEVEL` name as a `logging` level."""
    return logging.getLevelNamesMapping()[name.upper()]


def configure(log_format: LogFormat = "text", level: int = logging.INFO) -> None:
    """One line per record on stderr, unless the host application configured logging itself."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(formatter(log_format))
        root.addHandler(handler)
        root.setLevel(level)
    # The Machine logs every state change at INFO; our transitions stream already records them.
    logging.getLogger("transitions").setLevel(logging.WARNING)


def log_notes(log: logging.Logger, notes: Iterable[Note], partition: int, worker: str) -> None:
    """One INFO line per turn event of a committed batch."""
    if not log.isEnabledFor(logging.INFO):
        return
    for note in notes:
        details = " ".join(f"{k}={v}" for k, v in note.detail.items() if k != "error")
        context = {"session_id": note.session_id, "turn_id": note.turn_id, "event": note.what}
        log.info(
            "turn %s of session %s %s: %s",
            note.turn_id,
            note.session_id,
            note.what,
            details,
            extra={**note.detail, **context, "partition": partition, "worker": worker},
        )
