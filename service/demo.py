"""The demo workload: recorded transcripts that walk a new user through every path of a turn.

Each scenario is a list of transcripts, the successive attempts of one turn. Until the Redis runtime
lands, `terminus run --demo` folds them in process through the same core the workers will run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

import msgspec

from events.outbound import AgentError, Retrying, TextPart
from service.simulate import Outcome, SimulationError, simulate

DEMO_DIR = Path(__file__).parent / "demo_transcripts"


class Scenario(msgspec.Struct, frozen=True):
    title: str
    provider: str
    files: tuple[str, ...]


SCENARIOS = (
    Scenario("complete answer", "anthropic", ("text-recorded-fantasy.sse",)),
    Scenario(
        "cut mid-stream, then retried",
        "anthropic",
        ("truncated-mid-tool-input-tail-litellm-pr32159.partial.sse", "text-recorded-fantasy.sse"),
    ),
    Scenario(
        "empty synthesized finish, then retried",
        "openai-chat",
        ("synthesized-empty-finish.jsonl", "text-stop-usage-done-recorded-fantasy.sse"),
    ),
    Scenario(
        "rate limited, then complete",
        "anthropic",
        (
            "http-429-rate-limit-error-recorded-sdk-python.json",
            "text-after-429-retries-recorded-sdk-python.sse",
        ),
    ),
    Scenario(
        "overloaded until failure",
        "anthropic",
        ("http-529-overloaded-sdk-ts-issue616.json",) * 3,
    ),
)


def run_demo(fixtures: Path | None = None, stream: TextIO = sys.stdout) -> int:
    """Play every scenario and print its transitions, message and errors."""
    directory = fixtures or DEMO_DIR
    for number, scenario in enumerate(SCENARIOS, start=1):
        try:
            outcome = simulate(
                [directory / f for f in scenario.files],
                provider=scenario.provider,
                session_id=f"demo-session-{number}",
                turn_id=f"demo-turn-{number}",
            )
        except SimulationError as exc:
            print(f"demo: {exc}", file=sys.stderr)
            return 1
        print(f"\n[{number}] {scenario.title} ({scenario.provider})", file=stream)
        _print_outcome(outcome, stream)
    return 0


def _print_outcome(outcome: Outcome, stream: TextIO) -> None:
    for t in outcome.transitions:
        print(
            f"    step {t.step} attempt {t.attempt}: {t.source} -> {t.dest}  ({t.trigger})",
            file=stream,
        )
    for frame in outcome.updates:
        if isinstance(frame, Retrying):
            print(f"    retrying as attempt {frame.attempt} in {frame.delay_ms} ms: {frame.reason}",
                  file=stream)  # fmt: skip
        elif isinstance(frame, AgentError):
            error = frame.error
            print(f"    agent_error {error.type} (retryable={error.retryable}): {error.message}",
                  file=stream)  # fmt: skip
    if outcome.message is not None:
        text = "".join(p.text for p in outcome.message.parts if isinstance(p, TextPart))
        print(f"    message: {_clip(text)!r}", file=stream)
    print(f"    final state: {outcome.state}", file=stream)


def _clip(text: str, width: int = 100) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
