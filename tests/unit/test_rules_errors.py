"""Stream errors: classified, retried or failed, one typed agent_error (DESIGN section 3)."""

from __future__ import annotations

import pytest
from factories import (
    AUTH_BODY,
    OVERFLOW_BODY,
    OVERLOADED_BODY,
    Script,
    fold,
    frames_of,
)
from machine_checks import (
    S,
    concluded,
    one_agent_error,
)

from terminus.events.outbound import (
    AgentError,
    AttemptDiscarded,
    CompactionRequired,
    CompactionRequiredFrame,
    Retrying,
    RetryScheduled,
    TextPart,
)

# --- stream errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "error_type"),
    [
        (529, OVERLOADED_BODY, "provider_unavailable"),
        (503, None, "provider_unavailable"),
        (429, None, "rate_limit"),
        (None, "connection reset", "provider_unavailable"),
    ],
)
def test_retryable_stream_error_retries_with_the_error(
    status: int | None, body: object, error_type: str
) -> None:
    s = Script(contract="anthropic-messages")
    s.text("a", "partial")
    s.error(status, body)
    turn, out = fold(s.events)
    assert turn.state is S.RETRYING
    retrying = frames_of(out, Retrying)
    assert len(retrying) == 1
    assert retrying[0].attempt == 2
    assert retrying[0].error is not None
    assert (retrying[0].error.type, retrying[0].error.status) == (error_type, status)
    assert retrying[0].error.retryable
    command = out.commands[0]
    assert isinstance(command, RetryScheduled)
    assert command.error == retrying[0].error
    assert frames_of(out, AttemptDiscarded)[0].part_ids == ["a"]
    assert not frames_of(out, AgentError)


@pytest.mark.parametrize(
    ("status", "body", "error_type"),
    [(401, AUTH_BODY, "auth"), (403, None, "auth"), (402, None, "budget")],
)
def test_non_retryable_stream_error_fails_with_one_agent_error(
    status: int, body: object, error_type: str
) -> None:
    s = Script()
    s.text("a", "partial")
    s.error(status, body)
    turn, out = fold(s.events)
    assert turn.state is S.FAILED
    error = one_agent_error(out).error
    assert (error.type, error.status, error.retryable) == (error_type, status, False)
    assert isinstance(out.frames[-1], AgentError)
    assert out.commands == [concluded(out)]
    assert (concluded(out).state, concluded(out).error) == ("failed", error)
    assert not out.messages
    assert [p.attempt for p in out.partials] == [1]
    assert out.partials[0].parts == [TextPart(part_id="a", text="partial")]


def test_context_overflow_requires_compaction_and_waits_for_a_new_attempt() -> None:
    s = Script(contract="anthropic-messages")
    s.text("a", "partial")
    s.error(400, OVERFLOW_BODY)
    turn, out = fold(s.events)
    assert turn.state is S.RETRYING
    assert not frames_of(out, AgentError)
    compaction = frames_of(out, CompactionRequiredFrame)
    assert len(compaction) == 1
    assert (compaction[0].step, compaction[0].attempt) == (1, 2)
    assert compaction[0].error.type == "context_overflow"
    assert len(out.commands) == 1
    command = out.commands[0]
    assert isinstance(command, CompactionRequired)
    assert (command.step, command.attempt, command.error) == (1, 2, compaction[0].error)
    s.next_attempt()
    s.text("b", "after compaction")
    s.prove()
    turn, out = fold(s.events)
    assert turn.state is S.FINISHED
    assert [p for p in out.messages[-1].parts if isinstance(p, TextPart)] == [
        TextPart(part_id="b", text="after compaction")
    ]
