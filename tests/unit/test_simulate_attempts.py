"""Transcripts played one per attempt: only the last attempt's parts are kept, a turn that runs
out of attempts ends with one agent error, a compacted attempt finishes, and an exhausted
truncation keeps or discards its partial."""

from __future__ import annotations

from pathlib import Path

from simulated_fixtures import FIXTURES, run, text_of, write

from terminus.events.outbound import AgentError, TextPart, ToolPart


def test_cut_then_overloaded_then_complete_keeps_only_the_last_attempt() -> None:
    files = [
        "anthropic/truncated-mid-tool-input-tail-litellm-pr32159.partial.sse",
        "anthropic/http-529-overloaded-sdk-ts-issue616.json",
        "anthropic/text-recorded-fantasy.sse",
    ]
    outcome = run([FIXTURES / f for f in files], "anthropic")
    assert outcome.state == "finished"
    assert [a.outcome for a in outcome.attempts] == ["truncated", "failed", "finished"]
    assert text_of(outcome).startswith("Olá!")
    assert outcome.message is not None
    assert {p.part_id for p in outcome.message.parts if isinstance(p, TextPart)} == {"p1.3.0"}


def test_overloaded_until_failure_emits_one_agent_error_last() -> None:
    file = FIXTURES / "anthropic/http-529-overloaded-sdk-ts-issue616.json"
    outcome = run([file] * 4, "anthropic")
    assert outcome.state == "failed"
    assert outcome.unused_files == [str(file)]
    errors = [u for u in outcome.updates if isinstance(u, AgentError)]
    assert len(errors) == 1
    assert outcome.updates[-1] is errors[0]
    assert errors[0].error.type == "provider_unavailable"
    assert errors[0].error.status == 529


def test_context_overflow_then_compacted_attempt_finishes() -> None:
    files = [
        "openai-responses/failed-context-length-exceeded-codex.sse",
        "openai-responses/text-completed-recorded-fantasy.sse",
    ]
    outcome = run([FIXTURES / f for f in files], "openai-responses")
    kinds = [u.__struct_config__.tag for u in outcome.updates]
    assert "compaction_required" in kinds
    assert "agent_error" not in kinds
    assert (outcome.state, text_of(outcome)) == ("finished", "Oi!")


def test_exhausted_truncation_keeps_or_discards_the_partial(tmp_path: Path) -> None:
    cut = FIXTURES / "anthropic/max-tokens-mid-tool-input-sdk-python.sse"
    raw = cut.read_text().split("event: message_delta")[0]
    kept = run([write(tmp_path, raw, "cut.sse")] * 3, "anthropic")
    assert kept.state == "failed"
    assert kept.partial is not None
    assert any(isinstance(p, ToolPart) and p.state == "incomplete" for p in kept.partial.parts)
    dropped = run([write(tmp_path, raw, "cut.sse")] * 3, "anthropic", keep_partial=False)
    assert dropped.partial is None
    assert [u.__struct_config__.tag for u in dropped.updates][-2:] == [
        "attempt_discarded",
        "agent_error",
    ]
