"""Terminal contracts: what proves that an attempt really finished (DESIGN section 2).

A proof is necessary, not sufficient: the finish reason still decides between finished, truncated
and the next step.
"""

from __future__ import annotations

from typing import Final

import msgspec

from terminus.events.inbound import FinishStep
from terminus.events.outbound import TruncationReason


class ProofRule(msgspec.Struct, frozen=True, kw_only=True):
    """`finish_proves`: a genuine finish-step is itself the proof; else one of `terminal_kinds`."""

    finish_proves: bool
    terminal_kinds: frozenset[str] = frozenset()


_ANTHROPIC = frozenset(("message_stop",))
_RESPONSES = frozenset(("response.completed", "response.incomplete"))
_CHAT = frozenset(("[DONE]",))

# (contract, strict) -> rule; each row is one line of the DESIGN table.
CONTRACTS: Final[dict[tuple[str, bool], ProofRule]] = {
    ("anthropic-messages", True): ProofRule(finish_proves=False, terminal_kinds=_ANTHROPIC),
    ("anthropic-messages", False): ProofRule(finish_proves=True, terminal_kinds=_ANTHROPIC),
    ("openai-responses", True): ProofRule(finish_proves=False, terminal_kinds=_RESPONSES),
    ("openai-responses", False): ProofRule(finish_proves=False, terminal_kinds=_RESPONSES),
    ("openai-chat", True): ProofRule(finish_proves=False, terminal_kinds=_CHAT),
    ("openai-chat", False): ProofRule(finish_proves=True, terminal_kinds=_CHAT),
    ("gemini", True): ProofRule(finish_proves=True),
    ("gemini", False): ProofRule(finish_proves=True),
    ("ai-sdk", True): ProofRule(finish_proves=True),
    ("ai-sdk", False): ProofRule(finish_proves=True),
}


def proof_rule(contract: str, strict: bool) -> ProofRule:
    """The rule for a contract; unknown contracts fall back to the normalized `ai-sdk` one."""
    return CONTRACTS.get((contract, strict)) or CONTRACTS[("ai-sdk", strict)]


def synthesized_reason(finish: FinishStep, attempt_has_parts: bool) -> TruncationReason | None:
    """Why this finish-step is one an SDK made up rather than the provider's, or None if genuine."""
    reason = finish.finish_reason
    if reason in ("other", "unknown") and finish.raw_finish_reason is None:
        return "empty_other"
    if reason == "unknown" and finish.usage.output_tokens == 0:
        return "empty_other"
    # A raw `OTHER` (or any unmapped reason) with nothing produced is no answer at all.
    if reason == "other" and finish.usage.output_tokens == 0 and not attempt_has_parts:
        return "empty_other"
    if reason == "stop" and finish.usage.output_tokens == 0 and not attempt_has_parts:
        return "empty_stop"
    return None
