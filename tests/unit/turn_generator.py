"""Generated turns for the fold's property tests (DESIGN section 8).

The generator walks a small reference model of section 3 while it draws: each attempt gets an
ending, and the model says whether the step is proven, retried or the turn is over. The
properties then compare what the fold persisted with the attempts that were generated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

from factories import (
    AUTH_BODY,
    CONTRACTS,
    FINISH_PROVES,
    OVERFLOW_BODY,
    OVERLOADED_BODY,
    STRICT_TERMINAL,
    Script,
)
from hypothesis import settings
from hypothesis import strategies as st

from terminus.events.inbound import FinishReason, InboundEvent
from terminus.events.outbound import PersistedMessage
from terminus.statemachines.outputs import Outputs
from terminus.statemachines.states import TurnState

PROPERTY: Final = settings(max_examples=200, deadline=None)

Ending = Literal[
    "proof",
    "eof_before_finish",
    "eof_after_finish",
    "synthesized",
    "retryable_error",
    "fatal_error",
    "stall",
    "compaction",
]
ENDINGS: Final[tuple[Ending, ...]] = (
    "proof",
    "proof",
    "proof",
    "eof_before_finish",
    "eof_after_finish",
    "synthesized",
    "retryable_error",
    "fatal_error",
    "stall",
    "compaction",
)
RETRIED: Final[frozenset[Ending]] = frozenset(
    (
        "eof_before_finish",
        "eof_after_finish",
        "synthesized",
        "retryable_error",
        "stall",
        "compaction",
    )
)
UNPROVEN_FINISH: Final = tuple(c for c in CONTRACTS if c not in FINISH_PROVES)
LENIENT_TERMINAL: Final[dict[str, str]] = {
    "anthropic-messages": "message_stop",
    "openai-chat": "[DONE]",
}
ToolKind = Literal["result", "error", "early_error", "call_only", "after_proof", "unclosed"]
TOOL_KINDS: Final[tuple[ToolKind, ...]] = (
    "result",
    "error",
    "early_error",
    "call_only",
    "after_proof",
    "unclosed",
)
RETRYABLE_ERRORS: Final[tuple[tuple[int, Any], ...]] = (
    (529, OVERLOADED_BODY),
    (503, None),
    (429, None),
    (500, None),
)
FATAL_ERRORS: Final[tuple[tuple[int, Any], ...]] = (
    (401, AUTH_BODY),
    (403, None),
    (400, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}),
)
SYNTHESIZED: Final[tuple[tuple[FinishReason, str | None, int], ...]] = (
    ("other", None, 5),
    ("unknown", None, 5),
    ("unknown", "weird", 0),
)
LAST_STEP_REASONS: Final[tuple[tuple[FinishReason, str], ...]] = (
    ("stop", "end_turn"),
    ("length", "max_tokens"),
    ("content-filter", "refusal"),
    ("other", "compaction"),
    ("tool-calls", "tool_use"),
)

Content = tuple[Literal["text", "reasoning"], list[str]] | tuple[Literal["tool"], ToolKind]
deltas = st.lists(st.text(alphabet="ab \u2713\n", min_size=1, max_size=4), max_size=3)
content_item: st.SearchStrategy[Content] = st.one_of(
    st.tuples(st.sampled_from(("text", "reasoning")), deltas),
    st.tuples(st.just("tool"), st.sampled_from(TOOL_KINDS)),
)


@dataclass
class Attempt:
    """What one generated attempt streamed, and what its parts must look like if persisted."""

    step: int
    attempt: int
    ending: Ending = "proof"
    texts: list[tuple[str, str, str]] = field(default_factory=list)  # (type, part_id, text)
    tools: dict[str, ToolKind] = field(default_factory=dict)
    finish_reason: FinishReason | None = None

    @property
    def part_ids(self) -> set[str]:
        return {part_id for _, part_id, _ in self.texts} | set(self.tools)

    def tool_states(self) -> list[tuple[str, str]]:
        return [
            (call_id, expected_tool_state(kind, self.finish_reason))
            for call_id, kind in self.tools.items()
        ]


@dataclass
class GeneratedTurn:
    events: list[InboundEvent]
    attempts: list[Attempt]
    proven: dict[int, Attempt]
    state: TurnState


def expected_tool_state(kind: ToolKind, finish: FinishReason | None) -> str:
    if kind == "unclosed":
        return "incomplete"
    if kind == "result" or (kind == "after_proof" and finish == "tool-calls"):
        return "completed"
    return "error"


def emit_content(s: Script, record: Attempt, items: list[Content]) -> None:
    prefix = f"{record.step}.{record.attempt}"
    for index, item in enumerate(items):
        part_id = f"{prefix}.{index}"
        if item[0] == "tool":
            emit_tool(s, f"call-{part_id}", item[1])
            record.tools[f"call-{part_id}"] = item[1]
            continue
        kind, chunks = item
        if kind == "text":
            s.text(part_id, *chunks)
        else:
            s.reasoning(part_id, *chunks, signature="sig")
        record.texts.append((kind, part_id, "".join(chunks)))


def emit_tool(s: Script, call_id: str, kind: ToolKind) -> None:
    if kind != "error":
        s.tool_input(call_id)
    if kind == "early_error":
        s.tool_error(call_id)
    if kind != "unclosed":
        s.tool_call(call_id, q=call_id)
    if kind == "result":
        s.tool_result(call_id, f"out-{call_id}")
    elif kind == "error":
        s.tool_error(call_id)


def emit_proof(
    draw: st.DrawFn, s: Script, record: Attempt, reason: FinishReason, raw: str
) -> FinishReason:
    """The proof as the provider says it; returns the step's reason as the core must read it."""
    pending = any(kind in ("call_only", "after_proof") for kind in record.tools.values())
    effective: FinishReason = "tool-calls" if reason == "stop" and pending else reason
    record.finish_reason = effective
    proves = (s.contract, s.strict) in FINISH_PROVES
    if not proves and draw(st.booleans()):
        incomplete = s.contract == "openai-responses" and reason == "length"
        kind = "response.incomplete" if incomplete else STRICT_TERMINAL[s.contract]
        s.terminal(kind, finish_reason=reason)  # an end marker carrying its own finish reason
    else:
        s.finish(reason, raw, draw(st.integers(1, 50)))
        if not proves:
            incomplete = s.contract == "openai-responses" and reason == "length"
            s.terminal("response.incomplete" if incomplete else STRICT_TERMINAL[s.contract])
        elif s.contract in LENIENT_TERMINAL and draw(st.booleans()):
            s.terminal(LENIENT_TERMINAL[s.contract])
    if draw(st.booleans()):
        s.closed()
    for call_id, kind in record.tools.items():
        if kind == "after_proof" and effective == "tool-calls":
            s.tool_result(call_id, f"out-{call_id}")
    return effective


def emit_failure(draw: st.DrawFn, s: Script, ending: Ending, has_parts: bool) -> None:
    """An attempt that ends without proof: EOF, a made-up finish, an error or a stall."""
    if ending == "eof_after_finish" or (
        ending.endswith("error")
        and (s.contract, s.strict) in UNPROVEN_FINISH
        and draw(st.booleans())
    ):
        s.finish("stop", "end_turn", 3)
    if ending in ("eof_before_finish", "eof_after_finish"):
        s.closed()
    elif ending == "synthesized":
        choices = SYNTHESIZED if has_parts else (*SYNTHESIZED, ("stop", "end_turn", 0))
        s.finish(*draw(st.sampled_from(choices)))
        if draw(st.booleans()):
            s.closed()
    elif ending == "stall":
        s.stalled()
    else:
        errors = {"retryable_error": RETRYABLE_ERRORS, "fatal_error": FATAL_ERRORS}
        s.error(*draw(st.sampled_from(errors.get(ending, ((400, OVERFLOW_BODY),)))))


def start_attempt(
    draw: st.DrawFn, s: Script | None, ending: Ending, new_step: bool, max_attempts: int | None
) -> Script:
    pool = UNPROVEN_FINISH if ending == "eof_after_finish" else CONTRACTS
    contract, strict = draw(st.sampled_from(pool))
    if s is None:
        return Script(contract=contract, strict=strict, max_attempts=max_attempts)
    if new_step:
        s.next_step(contract=contract, strict=strict)
    else:
        s.next_attempt(contract=contract, strict=strict)
    return s


def end_of_turn(draw: st.DrawFn, s: Script) -> TurnState:
    """After a last step that ended in tool calls: the producer ends the turn, or goes silent."""
    if draw(st.booleans()):
        s.ended()
        return TurnState.FINISHED
    s.stalled()
    return TurnState.FAILED


@st.composite
def turns(draw: st.DrawFn) -> GeneratedTurn:
    """A valid turn: 1-3 steps of up to 4 attempts, each ending resolved as section 3 says."""
    max_attempts = draw(st.sampled_from((None, 1, 2, 3, 4)))
    limit, steps = max_attempts or 3, draw(st.integers(1, 3))
    s: Script | None = None
    attempts: list[Attempt] = []
    proven: dict[int, Attempt] = {}
    for step in range(1, steps + 1):
        for attempt in range(1, limit + 1):
            ending = draw(st.sampled_from(ENDINGS))
            s = start_attempt(draw, s, ending, attempt == 1 and step > 1, max_attempts)
            record = Attempt(step=step, attempt=attempt, ending=ending)
            attempts.append(record)
            emit_content(s, record, draw(st.lists(content_item, max_size=4)))
            if ending != "proof":
                emit_failure(draw, s, ending, bool(record.part_ids))
                if ending in RETRIED and attempt < limit:
                    continue
                return GeneratedTurn(s.events, attempts, proven, TurnState.FAILED)
            last = step == steps
            reason, raw = (
                draw(st.sampled_from(LAST_STEP_REASONS)) if last else ("tool-calls", "tool_use")
            )
            reason = emit_proof(draw, s, record, reason, raw)
            proven[step] = record
            if not last:
                break
            state = end_of_turn(draw, s) if reason == "tool-calls" else TurnState.FINISHED
            return GeneratedTurn(s.events, attempts, proven, state)
    raise AssertionError("unreachable: the last step always ends the turn")


def final_message(out: Outputs) -> PersistedMessage | None:
    return out.messages[-1] if out.messages else None
