"""Record the frame sequences both `LiveSession`s are held to, and the Python one's views:

    .venv/bin/python -m tests.agreement.record

Each sequence is what the gateway sends a session (`id:` and `data:` of each event): the frames
`terminus simulate` folds from recorded provider transcripts (the workers' own core), with
stream ids as cursors. Some sessions hold several turns, and some a resume that re-delivers
frames already seen, as a client that resumes from an older cursor gets them. One turn is stopped
by its user mid-answer (transcripts/stopped-by-user.jsonl). One session is what a newer server
would send: a frame kind this build does not know between the frames, and a field it does not
know on every frame (docs/schema.md, "Frames").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from terminus.events.codec import encode_json
from terminus.events.outbound import SessionUpdate
from terminus.service.cli.simulate import simulate

from .views import SEQUENCES, VIEWS, python_view

STREAMS: Final = Path(__file__).parents[1] / "fixtures" / "provider-streams"
A: Final = STREAMS / "anthropic"

# session -> its turns, each (provider, the files of its successive attempts)
SESSIONS: Final[dict[str, list[tuple[str, list[Path]]]]] = {
    "cut-then-retried": [
        (
            "anthropic",
            [
                A / "truncated-mid-tool-input-tail-litellm-pr32159.partial.sse",
                A / "text-recorded-fantasy.sse",
            ],
        )
    ],
    "rate-limited-then-complete": [
        (
            "anthropic",
            [
                A / "http-429-rate-limit-error-recorded-sdk-python.json",
                A / "text-after-429-retries-recorded-sdk-python.sse",
            ],
        )
    ],
    "overloaded-until-failure": [
        ("anthropic", [A / "http-529-overloaded-sdk-ts-issue616.json"] * 3)
    ],
    "reasoning-and-tools": [("anthropic", [A / "thinking-tool-use-recorded-fantasy.sse"])],
    "max-tokens-mid-tool": [("anthropic", [A / "max-tokens-mid-tool-input-sdk-python.sse"])],
    "two-turns": [
        (
            "anthropic",
            [A / "api-error-mid-stream-litellm-issue-4562.sse", A / "text-recorded-fantasy.sse"],
        ),
        ("openai-chat", [STREAMS / "openai-chat/tool-calls-usage-done-recorded-fantasy.sse"]),
    ],
    "stopped-then-asked-again": [
        ("anthropic", [Path(__file__).parent / "transcripts" / "stopped-by-user.jsonl"]),
        ("anthropic", [A / "text-recorded-fantasy.sse"]),
    ],
}
# session -> the session whose frames a newer server sends it, with a kind and a field added
FUTURE: Final = {"from-a-newer-server": "stopped-then-asked-again"}
FUTURE_KIND: Final = "usage_forecast"
RESUMED: Final = {"cut-then-retried": 5, "two-turns": 9, "from-a-newer-server": 6}


def frames(session: str) -> list[SessionUpdate]:
    found: list[SessionUpdate] = []
    for number, (provider, files) in enumerate(SESSIONS[session], start=1):
        outcome = simulate(files, provider=provider, session_id=session, turn_id=f"t{number}")
        found += outcome.updates
    return found


def from_the_future(session: str) -> list[dict[str, Any]]:
    """The frames of `session` with a field no build knows yet on each, and after every third
    one a frame of a kind no build knows yet."""
    found: list[dict[str, Any]] = []
    for n, frame in enumerate(frames(session)):
        found.append({**json.loads(encode_json(frame)), "confidence": 0.5})
        if n % 3 == 2:
            ids = {"session_id": frame.session_id, "turn_id": frame.turn_id, "cursor": None}
            found.append({"sessionUpdate": FUTURE_KIND, **ids, "tokens_left": 100 * n})
    return found


def sequence(session: str) -> list[dict[str, str]]:
    written = (
        [json.dumps(f, separators=(",", ":")) for f in from_the_future(FUTURE[session])]
        if session in FUTURE
        else [encode_json(frame).decode() for frame in frames(session)]
    )
    events = [{"cursor": f"1764000000000-{n}", "data": data} for n, data in enumerate(written)]
    back = RESUMED.get(session)
    if back:  # a client resumed from an older cursor: what it already had comes again
        events = events[: len(events) - back // 2] + events[-back:]
    return events


def main() -> None:
    for session in [*SESSIONS, *FUTURE]:
        path = SEQUENCES / f"{session}.jsonl"
        path.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in sequence(session)))
        view = python_view(path)
        (VIEWS / f"{session}.json").write_text(json.dumps(view, indent=1, sort_keys=True) + "\n")
        print(f"{path}: {len(sequence(session))} events, {len(view['turns'])} turns")


if __name__ == "__main__":
    main()
