"""The live view as plain JSON, the same shape the TypeScript client's agreement test makes
(clients/typescript/test/agreement.test.ts), so the two `LiveSession`s can be compared."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import msgspec

from terminus.service.sdk.live import LiveSession
from terminus.service.sdk.updates import UnknownFrames, decoded

HERE: Final = Path(__file__).parent
SEQUENCES: Final = HERE / "sequences"
VIEWS: Final = HERE / "views"


def read_sequence(path: Path) -> list[tuple[str, str]]:
    """(cursor, data) of each SSE event recorded in `path`, as a gateway sends them."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    return [(row["cursor"], row["data"]) for row in rows]


def view_of(session: LiveSession) -> dict[str, Any]:
    turns = []
    for turn in session.turns.values():
        parts = [
            {
                "step": p.step,
                "attempt": p.attempt,
                "part_id": p.part_id,
                "kind": p.kind,
                "text": p.text,
                "tool_name": p.tool_name,
                "input": p.input,
                "status": p.status,
                "output": p.output,
                "error": p.error,
            }
            for p in turn.parts.values()
        ]
        error = msgspec.to_builtins(turn.error) if turn.error is not None else None
        turns.append(
            {
                "turn_id": turn.turn_id,
                "status": turn.status,
                "stop_reason": turn.stop_reason,
                "error": error,
                "messages": list(turn.messages),
                "text": turn.text(),
                "reasoning": turn.reasoning(),
                "parts": parts,
            }
        )
    return {"cursor": session.cursor, "turns": turns}


def python_view(path: Path) -> dict[str, Any]:
    """What the Python `LiveSession` shows after every event of the sequence, applied in order,
    and the frames of kinds it does not know that it passed over, per kind."""
    session, unknown = LiveSession(), UnknownFrames(report=lambda kind, cursor: None)
    for cursor, data in read_sequence(path):
        update = decoded(cursor, data, unknown)
        if update is not None:
            session.apply(update)
    return {**view_of(session), "unknown_frames": unknown.counts}
