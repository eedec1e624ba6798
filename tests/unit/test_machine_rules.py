"""Every rule of DESIGN section 3, one named test each, folded from scripted inbound events."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from factories import (
    AUTH_BODY,
    CONTRACTS,
    FINISH_PROVES,
    OVERFLOW_BODY,
    OVERLOADED_BODY,
    STRICT_TERMINAL,
    Script,
    fold,
    frames_of,
    snapshot,
)

from events.inbound import (
    AttemptStarted,
    Contract,
    FinishReason,
    TextDelta,
    Usage,
)
from events.outbound import (
    AgentError,
    AttemptDiscarded,
    CompactionRequired,
    CompactionRequiredFrame,
    MessageCommitted,
    Retrying,
    RetryScheduled,
    StepFinishPart,
    StepStartPart,
    StopReason,
    TextPart,
    ToolPart,
    TurnFinished,
)
from statemachines.config import CoreConfig
from statemachines.errors import IllegalEvent, IllegalTransition
from statemachines.fold import evolve
from statemachines.outputs import Outputs
from statemachines.retry_policy import RetryPolicy, backoff_ms, jitter_fraction
from statemachines.states import FINAL_STATES, TurnState
from statemachines.table import TABLE, TRIGGERS, advance
from statemachines.turn import Turn

S = TurnState
STEP_USAGE = Usage(input_tokens=11, output_tokens=7)  # what Script.finish reports
Step = Callable[[Script], None]


def _sources(source: Any) -> list[TurnState]:
    return [TurnState(s) for s in source] if isinstance(source, list) else [TurnState(source)]


ALLOWED: dict[tuple[TurnState, str], TurnState] = {
    (source, str(trigger)): TurnState(dest)
    for trigger, sources, dest in TABLE
    for source in _sources(sources)
}


def table_rows(out: Outputs) -> set[tuple[str, str, str]]:
    return {(t.trigger, t.source, t.dest) for t in out.transitions}


def dests(out: Outputs) -> list[str]:
    return [t.dest for t in out.transitions]


def one_agent_error(out: Outputs) -> AgentError:
    found = frames_of(out, AgentError)
    assert len(found) == 1, out.frames
    return found[0]


def assert_truncated_then_retrying(turn: Turn, out: Outputs, reason: str) -> None:
    """Truncated with `reason`, discarded, and a retry of attempt 2 scheduled."""
    assert turn.state is S.RETRYING
    assert dests(out)[-2:] == ["truncated", "retrying"]
    assert turn.history[-1].outcome == "truncated"
    assert turn.history[-1].reason == reason
    discarded, retrying = out.frames[-2:]
    assert isinstance(discarded, AttemptDiscarded)
    assert (discarded.step, discarded.attempt, discarded.reason) == (1, 1, reason)
    assert isinstance(retrying, Retrying)
    assert (retrying.step, retrying.attempt, retrying.reason) == (1, 2, reason)
    assert retrying.max_attempts == 3
    assert retrying.error is None
    assert len(out.commands) == 1
    command = out.commands[0]
    assert isinstance(command, RetryScheduled)
    assert (command.step, command.attempt, command.reason) == (1, 2, reason)
    assert command.delay_ms == retrying.delay_ms > 0
    assert not frames_of(out, AgentError)
    assert not out.messages


# --- the transition table --------------------------------------------------------------------


@pytest.mark.parametrize("state", list(TurnState))
@pytest.mark.parametrize("trigger", sorted(TRIGGERS))
def test_table_is_the_authority_for_every_state_and_trigger(state: TurnState, trigger: str) -> None:
    if (state, trigger) in ALLOWED:
        assert advance(state, trigger) is ALLOWED[(state, trigger)]
    else:
        with pytest.raises(IllegalTransition):
            advance(state, trigger)


@pytest.mark.parametrize("state", list(TurnState))
def test_unknown_trigger_is_illegal(state: TurnState) -> None:
    with pytest.raises(IllegalTransition):
        advance(state, "teleport")


@pytest.mark.parametrize("state", sorted(FINAL_STATES))
def test_final_states_have_no_outgoing_transition(state: TurnState) -> None:
    assert not [key for key in ALLOWED if key[0] is state]
    for trigger in TRIGGERS:
        with pytest.raises(IllegalTransition):
            advance(state, trigger)


def test_every_transition_the_fold_records_is_a_table_row() -> None:
    s = Script(contract="anthropic-messages")
    s.text("a", "x")
    s.closed()
    s.next_attempt()
    s.error(529, OVERLOADED_BODY)
    s.next_attempt()
    s.tool_input("c1")
    s.tool_call("c1")
    s.prove("tool-calls", "tool_use")
    s.tool_result("c1")
    s.next_step()
    s.text("b", "y")
    s.prove()
    turn, out = fold(s.events)
    assert turn.state is S.FINISHED
    rows = {(trigger, source.value, dest.value) for (source, trigger), dest in ALLOWED.items()}
    assert table_rows(out) <= rows


# --- terminal contracts ----------------------------------------------------------------------


@pytest.mark.parametrize(("contract", "strict"), CONTRACTS)
def test_terminal_contract_decides_what_proves_a_finish(contract: Contract, strict: bool) -> None:
    s = Script(contract=contract, strict=strict)
    s.text("a", "hello")
    s.finish("stop")
    turn, _ = fold(s.events)
    if (contract, strict) in FINISH_PROVES:
        assert turn.state is S.FINISHED
        return
    assert turn.state is S.AWAITING_TERMINAL
    s.terminal(STRICT_TERMINAL[contract])
    turn, out = fold(s.events)
    assert turn.state is S.FINISHED
    assert [f.stopReason for f in frames_of(out, TurnFinished)] == ["end_turn"]


# --- truncation: EOF and stalls before proof ---------------------------------------------------


def _streaming(s: Script) -> None:
    s.text("a", "partial ")


def _awaiting_terminal(s: Script) -> None:
    s.text("a", "partial ")
    s.finish("stop")


OPEN_STATES: list[tuple[str, Contract, Step, TurnState]] = [
    ("streaming-ai-sdk", "ai-sdk", _streaming, S.STREAMING),
    ("streaming-anthropic", "anthropic-messages", _streaming, S.STREAMING),
    ("awaiting-terminal-anthropic", "anthropic-messages", _awaiting_terminal, S.AWAITING_TERMINAL),
    ("awaiting-terminal-chat", "openai-chat", _awaiting_terminal, S.AWAITING_TERMINAL),
    ("awaiting-terminal-responses", "openai-responses", _awaiting_terminal, S.AWAITING_TERMINAL),
]


@pytest.mark.parametrize(
    ("contract", "before", "state"),
    [pytest.param(c, b, st, id=i) for i, c, b, st in OPEN_STATES],
)
def test_eof_before_proof_truncates_missing_terminal(
    contract: Contract, before: Step, state: TurnState
) -> None:
    s = Script(contract=contract)
    before(s)
    assert fold(s.events)[0].state is state
    s.closed()
    turn, out = fold(s.events)
    assert_truncated_then_retrying(turn, out, "missing_terminal")
    assert frames_of(out, AttemptDiscarded)[0].part_ids == ["a"]


@pytest.mark.parametrize(
    ("contract", "before", "state"),
    [pytest.param(c, b, st, id=i) for i, c, b, st in OPEN_STATES],
)
def test_stall_before_proof_truncates_stalled(
    contract: Contract, before: Step, state: TurnState
) -> None:
    s = Script(contract=contract)
    before(s)
    assert fold(s.events)[0].state is state
    s.stalled()
    turn, out = fold(s.events)
    assert_truncated_then_retrying(turn, out, "stalled")


def test_stall_while_retrying_fails_with_one_agent_error() -> None:
    s = Script()
    s.text("a", "partial")
    s.closed()
    assert fold(s.events)[0].state is S.RETRYING
    s.stalled()
    turn, out = fold(s.events)
    assert turn.state is S.FAILED
    one_agent_error(out)
    assert isinstance(out.frames[-1], AgentError)


# --- synthesized and empty finishes ----------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "raw", "output_tokens", "with_text", "truncation"),
    [
        pytest.param("other", None, 12, True, "empty_other", id="other-without-raw"),
        pytest.param("unknown", None, 12, True, "empty_other", id="unknown-without-raw"),
        pytest.param("unknown", "weird", 0, True, "empty_other", id="unknown-zero-tokens"),
        pytest.param("stop", "end_turn", 0, False, "empty_stop", id="stop-zero-tokens-no-parts"),
        pytest.param(
            "other", "OTHER", 0, False, "empty_other", id="other-raw-zero-tokens-no-parts"
        ),
    ],
)
def test_synthesized_finish_truncates(
    reason: FinishReason, raw: str | None, output_tokens: int, with_text: bool, truncation: str
) -> None:
    s = Script()
    if with_text:
        s.text("a", "hi")
    s.finish(reason, raw, output_tokens)
    turn, out = fold(s.events)
    assert_truncated_then_retrying(turn, out, truncation)


@pytest.mark.parametrize(
    ("reason", "raw", "output_tokens", "with_text", "stop"),
    [
        pytest.param("other", "compaction", 12, True, "end_turn", id="other-with-raw-reason"),
        pytest.param("other", "compaction", 0, True, "end_turn", id="other-raw-no-tokens-but-text"),
        pytest.param("unknown", "weird", 3, True, "end_turn", id="unknown-with-raw-and-tokens"),
        pytest.param("stop", "end_turn", 0, True, "end_turn", id="stop-zero-tokens-with-parts"),
        pytest.param("length", "max_tokens", 9, True, "max_tokens", id="length"),
        pytest.param("content-filter", "refusal", 1, True, "refusal", id="content-filter"),
    ],
)
def test_genuine_finish_is_proof_under_ai_sdk(
    reason: FinishReason, raw: str, output_tokens: int, with_text: bool, stop: StopReason
) -> None:
    s = Script(contract="ai-sdk")
    if with_text:
        s.text("a", "hi")
    s.finish(reason, raw, output_tokens)
    turn, out = fold(s.events)
    assert turn.state is S.FINISHED
    assert not out.commands
    assert [f.stopReason for f in frames_of(out, TurnFinished)] == [stop]
    assert out.messages[-1].finish_reason == reason


# --- openai response.incomplete --------------------------------------------------------------


def _finish_then_incomplete(s: Script) -> None:
    s.finish("length", "max_output_tokens")
    s.terminal("response.incomplete")


def _incomplete_alone(s: Script) -> None:
    s.terminal("response.incomplete", finish_reason="length")


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("ending", [_finish_then_incomplete, _incomplete_alone])
def test_response_incomplete_is_proof_with_max_tokens(ending: Step, strict: bool) -> None:
    s = Script(contract="openai-responses", strict=strict)
    s.text("a", "a long answer that was cut")
    ending(s)
    turn, out = fold(s.events)
    assert turn.state is S.FINISHED
    assert [f.stopReason for f in frames_of(out, TurnFinished)] == ["max_tokens"]
    assert not out.commands
    assert not frames_of(out, Retrying)
    assert out.messages[-1].finish_reason == "length"


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
    assert not out.commands
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


# --- retry budgets ---------------------------------------------------------------------------


def _eof(s: Script) -> None:
    s.text(f"p{s.attempt}", "x")
    s.closed()


def _overloaded(s: Script) -> None:
    s.error(529, OVERLOADED_BODY)


def _stall(s: Script) -> None:
    s.stalled()


def _synthesized(s: Script) -> None:
    s.finish("other", None)


def _run_attempts(s: Script, endings: list[Step]) -> None:
    for index, ending in enumerate(endings):
        if index:
            s.next_attempt()
        ending(s)


def assert_failed_on_attempt(turn: Turn, out: Outputs, attempt: int) -> None:
    assert turn.state is S.FAILED
    assert turn.attempt == attempt
    assert len(frames_of(out, Retrying)) == attempt - 1
    assert len(out.commands) == attempt - 1
    one_agent_error(out)
    assert isinstance(out.frames[-1], AgentError)


def test_max_attempts_caps_a_step_whatever_the_cause() -> None:
    s = Script()
    _run_attempts(s, [_eof, _overloaded, _eof])
    turn, out = fold(s.events)
    assert_failed_on_attempt(turn, out, 3)
    assert [h.outcome for h in turn.history] == ["truncated", "failed", "truncated"]
    assert one_agent_error(out).error.attempt == 3


@pytest.mark.parametrize("ending", [_eof, _overloaded, _stall, _synthesized])
def test_default_max_attempts_is_three(ending: Step) -> None:
    s = Script()
    _run_attempts(s, [ending] * 3)
    turn, out = fold(s.events)
    assert_failed_on_attempt(turn, out, 3)


@pytest.mark.parametrize("max_attempts", [1, 2, 5])
def test_turn_started_overrides_max_attempts(max_attempts: int) -> None:
    s = Script(max_attempts=max_attempts)
    _run_attempts(s, [_eof] * max_attempts)
    turn, out = fold(s.events)
    assert_failed_on_attempt(turn, out, max_attempts)
    assert all(f.max_attempts == max_attempts for f in frames_of(out, Retrying))


def test_cause_cap_ends_retrying_before_max_attempts() -> None:
    config = CoreConfig(retry=RetryPolicy(cause_caps={"provider_unavailable": 2}))
    s = Script(max_attempts=6)
    _run_attempts(s, [_eof, _overloaded, _eof, _overloaded])
    turn, out = fold(s.events, config)
    assert_failed_on_attempt(turn, out, 4)


def test_cause_cap_counts_only_its_own_cause() -> None:
    config = CoreConfig(retry=RetryPolicy(cause_caps={"missing_terminal": 1}))
    s = Script(max_attempts=6)
    _run_attempts(s, [_overloaded, _stall, _eof])
    turn, out = fold(s.events, config)
    assert_failed_on_attempt(turn, out, 3)


def test_wait_budget_ends_retrying_before_max_attempts() -> None:
    config = CoreConfig(retry=RetryPolicy(wait_budget_ms=5_000))
    s = Script(max_attempts=10, ts_ms=1_700_000_000_000)
    for attempt in (1, 2, 3):
        if attempt > 1:
            s.next_attempt()
        s.error(429, None, {"retry-after": "2"})
    turn, out = fold(s.events, config)
    assert_failed_on_attempt(turn, out, 3)
    assert [f.delay_ms for f in frames_of(out, Retrying)] == [2_000, 2_000]


NOW_MS = 1_700_000_000_000


@pytest.mark.parametrize(
    ("headers", "wait_ms"),
    [
        ({"retry-after": "7"}, 7_000),
        ({"retry-after-ms": "7500"}, 7_500),
        ({"x-llm-error-reset-at": str(NOW_MS + 9_000)}, 9_000),
    ],
)
def test_retry_after_is_honoured(headers: dict[str, str], wait_ms: int) -> None:
    s = Script(ts_ms=NOW_MS)
    s.error(429, None, headers)
    turn, out = fold(s.events)
    assert turn.state is S.RETRYING
    (retrying,) = frames_of(out, Retrying)
    assert retrying.delay_ms >= wait_ms
    command = out.commands[0]
    assert isinstance(command, RetryScheduled)
    assert command.delay_ms == retrying.delay_ms
    assert command.not_before_ms == NOW_MS + retrying.delay_ms


def _delays(turn_id: str) -> list[int]:
    s = Script(turn_id=turn_id, max_attempts=6)
    _run_attempts(s, [_eof] * 5)
    return [f.delay_ms for f in frames_of(fold(s.events)[1], Retrying)]


def test_backoff_is_replay_exact() -> None:
    delays = _delays("turn-jitter")
    assert delays == _delays("turn-jitter")
    policy = RetryPolicy()
    assert delays == [backoff_ms(policy, "turn-jitter", 1, a) for a in range(1, 6)]


def test_backoff_jitter_differs_across_attempts_and_turns() -> None:
    fractions = [jitter_fraction("turn-jitter", 1, a) for a in range(1, 9)]
    assert len(set(fractions)) == len(fractions)
    assert all(0 <= f < 1 for f in fractions)
    assert jitter_fraction("turn-jitter", 1, 1) != jitter_fraction("turn-jitter", 2, 1)
    assert _delays("turn-a") != _delays("turn-b")
    for attempt, delay in enumerate(_delays("turn-a"), start=1):
        ceiling = min(30_000, 500 * 2 ** (attempt - 1))
        assert ceiling // 2 <= delay < ceiling


# --- tool calls ------------------------------------------------------------------------------


@pytest.mark.parametrize("input_started", [True, False])
def test_tool_error_before_its_tool_call_is_kept(input_started: bool) -> None:
    s = Script()
    if input_started:
        s.tool_input("c1")
    s.tool_error("c1", "sandbox refused")
    s.tool_call("c1", q="x")
    s.prove("tool-calls", "tool_use")
    s.ended()
    turn, out = fold(s.events)
    assert turn.state is S.FINISHED
    tools = [p for p in out.messages[-1].parts if isinstance(p, ToolPart)]
    assert tools == [
        ToolPart(
            tool_call_id="c1",
            name="search",
            input={"q": "x"},
            state="error",
            error="sandbox refused",
        )
    ]


def test_max_tokens_inside_an_unclosed_tool_block_finishes_with_an_incomplete_tool() -> None:
    s = Script(contract="anthropic-messages")
    s.text("a", "let me look")
    s.tool_input("c1", delta='{"q": "par')
    s.finish("length", "max_tokens")
    s.terminal("message_stop")
    turn, out = fold(s.events)
    assert turn.state is S.FINISHED
    assert [f.stopReason for f in frames_of(out, TurnFinished)] == ["max_tokens"]
    assert not out.commands
    message = out.messages[-1]
    assert message.finish_reason == "length"
    (tool,) = [p for p in message.parts if isinstance(p, ToolPart)]
    assert (tool.tool_call_id, tool.state, tool.output) == ("c1", "incomplete", None)


def test_tool_calls_step_awaits_the_next_step_which_commits_it() -> None:
    s = Script()
    s.text("a", "searching")
    s.tool_input("c1")
    s.tool_call("c1", q="x")
    s.prove("tool-calls", "tool_use")
    turn, out = fold(s.events)
    assert turn.state is S.AWAITING_STEP
    assert not out.messages
    assert not frames_of(out, MessageCommitted)
    s.tool_result("c1", "42")
    s.next_step()
    turn, out = fold(s.events)
    assert turn.state is S.STREAMING
    committed = frames_of(out, MessageCommitted)
    assert [c.step for c in committed] == [1]
    assert out.messages[-1].finish_reason == "tool-calls"
    s.text("b", "the answer is 42")
    s.prove()
    turn, out = fold(s.events)
    assert turn.state is S.FINISHED
    assert [c.step for c in frames_of(out, MessageCommitted)] == [1, 2]
    assert out.messages[-1].parts == [
        StepStartPart(step=1),
        TextPart(part_id="a", text="searching"),
        ToolPart(
            tool_call_id="c1", name="search", input={"q": "x"}, state="completed", output="42"
        ),
        StepFinishPart(step=1, finish_reason="tool-calls", usage=STEP_USAGE),
        StepStartPart(step=2),
        TextPart(part_id="b", text="the answer is 42"),
        StepFinishPart(step=2, finish_reason="stop", usage=STEP_USAGE),
    ]
    assert [f.stopReason for f in frames_of(out, TurnFinished)] == ["end_turn"]


def test_turn_ended_in_awaiting_step_finishes_and_commits() -> None:
    s = Script()
    s.tool_call("c1")
    s.prove("tool-calls", "tool_use")
    s.tool_result("c1")
    s.ended()
    turn, out = fold(s.events)
    assert turn.state is S.FINISHED
    assert [c.step for c in frames_of(out, MessageCommitted)] == [1]
    assert [f.stopReason for f in frames_of(out, TurnFinished)] == ["end_turn"]
    assert isinstance(out.frames[-1], TurnFinished)


# --- cancellation ----------------------------------------------------------------------------


def _retrying(s: Script) -> None:
    _eof(s)


def _awaiting_step(s: Script) -> None:
    s.tool_call("c1")
    s.prove("tool-calls", "tool_use")


@pytest.mark.parametrize(
    ("before", "discarded", "committed"),
    [
        pytest.param(_streaming, [["a"]], 0, id="streaming"),
        pytest.param(_retrying, [["p1"]], 0, id="retrying"),
        pytest.param(_awaiting_step, [], 1, id="awaiting-step"),
    ],
)
def test_turn_cancelled_ends_the_turn_cancelled(
    before: Step, discarded: list[list[str]], committed: int
) -> None:
    s = Script()
    before(s)
    s.cancelled()
    turn, out = fold(s.events)
    assert turn.state is S.CANCELLED
    assert [f.part_ids for f in frames_of(out, AttemptDiscarded)] == discarded
    assert len(frames_of(out, MessageCommitted)) == committed
    assert [f.stopReason for f in frames_of(out, TurnFinished)] == ["cancelled"]
    assert isinstance(out.frames[-1], TurnFinished)
    assert not frames_of(out, AgentError)


# --- partial records -------------------------------------------------------------------------


@pytest.mark.parametrize("keep_partial", [True, False])
def test_exhaustion_keeps_or_discards_the_partial(keep_partial: bool) -> None:
    s = Script()
    _run_attempts(s, [_eof] * 3)
    turn, out = fold(s.events, CoreConfig(keep_partial=keep_partial))
    assert_failed_on_attempt(turn, out, 3)
    last_discard = frames_of(out, AttemptDiscarded)[-1]
    if keep_partial:
        (partial,) = out.partials
        assert (partial.attempt, partial.reason) == (3, "missing_terminal")
        assert partial.parts == [TextPart(part_id="p3", text="x")]
        assert last_discard.attempt == 2
    else:
        assert not out.partials
        assert (last_discard.attempt, last_discard.part_ids) == (3, ["p3"])
        assert out.frames[-2] == last_discard
    assert not out.messages


# --- ignored events --------------------------------------------------------------------------


def _finished() -> Script:
    s = Script()
    s.text("a", "done")
    s.prove()
    return s


def _failed() -> Script:
    s = Script()
    s.error(401, AUTH_BODY)
    return s


def _cancelled() -> Script:
    s = Script()
    s.cancelled()
    return s


LATE_EVENTS: dict[str, Step] = {
    "text": lambda s: s.text("z", "late"),
    "stream-closed": lambda s: s.closed(),
    "stream-error": lambda s: s.error(529, OVERLOADED_BODY),
    "attempt-stalled": lambda s: s.stalled(),
    "turn-cancelled": lambda s: s.cancelled(),
    "turn-ended": lambda s: s.ended(),
    "provider-terminal": lambda s: s.terminal("message_stop"),
    "next-attempt": lambda s: s.next_attempt(),
    "next-step": lambda s: s.next_step(),
}


def assert_ignored(turn: Turn, event_count: int, script: Script, label: str) -> None:
    """Apply the script's events from `event_count` on: each is ignored and counted."""
    before, counted = snapshot(turn), turn.ignored.get(label, 0)
    state = turn.state
    for event in script.events[event_count:]:
        out = Outputs()
        turn, _ = evolve(turn, event, out=out)
        assert out.ignored == [label], event
        assert out == Outputs(ignored=[label])
        assert turn.state is state
        assert snapshot(turn) == before
    assert turn.ignored[label] == counted + len(script.events) - event_count


@pytest.mark.parametrize("final", [_finished, _failed, _cancelled])
@pytest.mark.parametrize("late", list(LATE_EVENTS.values()), ids=list(LATE_EVENTS))
def test_events_of_a_final_turn_change_nothing(final: Callable[[], Script], late: Step) -> None:
    s = final()
    turn, _ = fold(s.events)
    assert turn.state in FINAL_STATES
    count = len(s.events)
    late(s)
    assert_ignored(turn, count, s, "late")


def test_duplicates_change_nothing() -> None:
    s = Script()
    s.text("a", "one", "two")
    s.tool_call("c1")
    turn, _ = fold(s.events)
    count = len(s.events)
    s.events.extend(s.events[:count])
    assert_ignored(turn, count, s, "duplicate")


def test_superseded_attempt_events_change_nothing() -> None:
    s = Script()
    _eof(s)
    s.next_attempt()
    s.text("b", "fresh")
    turn, _ = fold(s.events)
    count = len(s.events)
    # Attempt 1 goes on streaming after attempt 2 started: new seqs, old attempt.
    s.text("stale", "echo")
    s.closed()
    stale = [msgspec.structs.replace(e, attempt=1, seq=e.seq + 20) for e in s.events[count:]]
    s.events[count:] = stale
    assert_ignored(turn, count, s, "superseded")


def test_turn_snapshot_roundtrips_and_ignored_counters_are_counted() -> None:
    s = _finished()
    turn, _ = fold(s.events)
    s.closed()
    s.closed()
    turn, _ = fold(s.events)
    assert turn.ignored == {"late": 2}
    assert msgspec.json.decode(msgspec.json.encode(turn), type=Turn) == turn


def test_terminal_echo_in_awaiting_step_is_counted_as_ignored() -> None:
    s = Script(contract="anthropic-messages", strict=False)
    s.tool_call("c1")
    s.prove("tool-calls", "tool_use")
    turn, _ = fold(s.events)
    assert turn.state is S.AWAITING_STEP
    s.terminal("message_stop")
    out = Outputs()
    turn, _ = evolve(turn, s.events[-1], out=out)
    assert turn.state is S.AWAITING_STEP
    assert len(out.ignored) == 1
    assert sum(turn.ignored.values()) == 1, "listed in Outputs.ignored but not counted"


# --- illegal events --------------------------------------------------------------------------


def test_seq_gap_raises() -> None:
    s = Script()
    s.text("a", "one")
    turn, _ = fold(s.events)
    gap = TextDelta(
        session_id=s.session_id, turn_id=s.turn_id, seq=s.next_seq + 1, part_id="a", delta="x"
    )
    with pytest.raises(IllegalEvent, match="seq gap"):
        evolve(turn, gap)


def test_a_seq_skipped_by_a_gap_is_a_regression_not_a_duplicate() -> None:
    s = Script()
    s.text("a", "one")
    turn, _ = fold(s.events)
    skipped, after = s.next_seq, s.next_seq + 2

    def delta(seq: int) -> TextDelta:
        return TextDelta(
            session_id=s.session_id, turn_id=s.turn_id, seq=seq, part_id="a", delta="x"
        )

    with pytest.raises(IllegalEvent, match="seq gap"):
        evolve(turn, delta(after))
    with pytest.raises(IllegalEvent, match="seq regression"):
        evolve(turn, delta(skipped))
    _, out = evolve(turn, delta(after))
    assert out.ignored == ["duplicate"], "a seq that was applied stays a duplicate"
    _, out = evolve(turn, delta(after + 1))
    assert out.frames, "the stream goes on after the gap"


def test_event_for_a_turn_that_never_started_raises() -> None:
    s = Script()
    for event in s.events[1:]:
        with pytest.raises(IllegalEvent):
            evolve(None, event)
    delta = TextDelta(session_id="s", turn_id="t", seq=0, part_id="a", delta="x")
    with pytest.raises(IllegalEvent):
        evolve(None, delta)


def test_event_for_an_attempt_that_never_started_raises() -> None:
    s = Script()
    s.text("a", "x")
    turn, _ = fold(s.events)
    ahead = TextDelta(
        session_id=s.session_id, turn_id=s.turn_id, attempt=2, seq=0, part_id="b", delta="x"
    )
    with pytest.raises(IllegalEvent):
        evolve(turn, ahead)


def test_attempt_started_out_of_order_raises() -> None:
    s = Script()
    _eof(s)
    turn, _ = fold(s.events)
    skip = AttemptStarted(session_id=s.session_id, turn_id=s.turn_id, attempt=3, seq=0)
    with pytest.raises(IllegalEvent):
        evolve(turn, skip)
