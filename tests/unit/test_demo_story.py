"""The demo's story of a turn (issue 31, item 4): lines in the order the turn lived them, however
the watcher's reads cut the commits, and a cut attempt's text shown withdrawn with its reason."""

from __future__ import annotations

import io
import itertools
from typing import Final

from terminus.events.inbound import Usage
from terminus.events.outbound import AgentMessageChunk, AttemptDiscarded, Retrying, TurnFinished
from terminus.service.cli.demo_story import Entry, Story
from terminus.statemachines.outputs import Transition

IDS: Final = {"session_id": "s", "turn_id": "t"}


def moved(attempt: int, source: str, dest: str, trigger: str) -> Transition:
    return Transition(**IDS, step=1, attempt=attempt, source=source, dest=dest, trigger=trigger)


def chunk(attempt: int, delta: str) -> AgentMessageChunk:
    return AgentMessageChunk(**IDS, step=1, attempt=attempt, part_id=f"p1.{attempt}.0", delta=delta)


TRANSITIONS: list[Entry] = [
    moved(1, "pending", "streaming", "start_attempt"),
    moved(1, "streaming", "truncated", "truncate"),
    moved(1, "truncated", "retrying", "schedule_retry"),
    moved(2, "retrying", "streaming", "start_attempt"),
    moved(2, "streaming", "awaiting_terminal", "finish_step"),
    moved(2, "awaiting_terminal", "finished", "prove"),
]
FRAMES: list[Entry] = [
    chunk(1, "It is 4"),
    chunk(1, "2 and"),
    AttemptDiscarded(**IDS, step=1, attempt=1, part_ids=["p1.1.0"], reason="missing_terminal"),
    Retrying(
        session_id="s",
        turn_id="t",
        step=1,
        attempt=2,
        max_attempts=3,
        delay_ms=300,
        reason="missing_terminal",
    ),
    chunk(2, "It is 42."),
    TurnFinished(**IDS, stopReason="end_turn", usage=Usage()),
]
STORY = [
    "step 1 attempt 1: pending -> streaming  (start_attempt)",
    "attempt 1 streams text: It is 42 and",
    "step 1 attempt 1: streaming -> truncated  (truncate)",
    "step 1 attempt 1: truncated -> retrying  (schedule_retry)",
    "attempt 1 discarded (missing_terminal): its 12 streamed characters leave every screen",
    "    withdrawn: 'It is 42 and'",
    "    why: the stream closed before the provider's own end-of-answer event, so nothing "
    "proves the text was the whole answer",
    "retrying as attempt 2 in 300 ms: missing_terminal",
    "step 1 attempt 2: retrying -> streaming  (start_attempt)",
    "attempt 2 streams text: It is 42.",
    "step 1 attempt 2: streaming -> awaiting_terminal  (finish_step)",
    "step 1 attempt 2: awaiting_terminal -> finished  (prove)",
    "turn_finished: end_turn",
]


def told(reads: list[list[Entry]]) -> list[str]:
    out = io.StringIO()
    story = Story(out)
    for read in reads:
        story.tell(read)
    assert story.final_state == "finished"
    assert story.done.is_set()
    return [line.removeprefix("    ") for line in out.getvalue().splitlines()]


def test_one_read_of_the_whole_turn_is_told_in_order() -> None:
    """A read holds both streams, each in its order: told as the turn lived it (printed
    transitions first, attempt 2's start came before attempt 1's discard)."""
    assert told([TRANSITIONS + FRAMES]) == STORY


def test_reads_that_cut_the_turn_anywhere_tell_the_same_story() -> None:
    """Each read holds whole commits; however the commits fall into reads, the story is the
    same."""
    commits: list[list[Entry]] = [
        [TRANSITIONS[0], FRAMES[0]],
        [FRAMES[1]],
        [*TRANSITIONS[1:3], *FRAMES[2:4]],
        [TRANSITIONS[3], FRAMES[4]],
        [*TRANSITIONS[4:], FRAMES[5]],
    ]
    for cuts in itertools.product([False, True], repeat=len(commits) - 1):
        reads: list[list[Entry]] = [[*commits[0]]]
        for cut, commit in zip(cuts, commits[1:], strict=True):
            if cut:
                reads.append([])
            reads[-1].extend(commit)
        assert told(reads) == STORY, cuts


def test_the_retry_is_announced_to_the_producer_after_its_attempt_is_told() -> None:
    out = io.StringIO()
    story = Story(out)
    story.tell(TRANSITIONS[:3] + FRAMES[:3])
    assert not story.retry_shown.is_set()
    story.tell([FRAMES[3]])
    assert story.retry_shown.is_set()
