"""Captures stored without their terminal marker: strict mode retries them; with the marker's
blank line restored, or in lenient mode for compatible gateways, they finish."""

from __future__ import annotations

from pathlib import Path

import pytest
from simulated_fixtures import (
    EXPECTED,
    FIXTURES,
    TOOL_CALLS,
    Expected,
    finished,
    run,
    text_of,
    write,
)

# SDK fixtures that end without the blank line after `message_stop`: cut, by the WHATWG rule
# (tests/unit/test_adapters_anthropic.py). With the blank line they finish as recorded, and in
# lenient mode the `message_delta` before the lost `message_stop` already proves them.
UNTERMINATED: dict[str, Expected] = {
    "anthropic/max-tokens-mid-tool-input-sdk-python.sse": finished(
        "length", "comprehensive tax guide"
    ),
    "anthropic/refusal-stop-details-sdk-python.sse": finished("content-filter"),
    "anthropic/text-basic-ping-sdk-python.sse": finished("stop", "Hello there!"),
    "anthropic/tool-use-input-json-delta-sdk-python.sse": TOOL_CALLS,
}


@pytest.mark.parametrize("name", sorted(UNTERMINATED))
def test_unterminated_fixture_finishes_with_its_blank_line_or_lenient(
    name: str, tmp_path: Path
) -> None:
    state, _, _, finish, snippet = UNTERMINATED[name]
    text = (FIXTURES / name).read_text()
    completed = write(tmp_path, text.rstrip("\n") + "\n\n", Path(name).name)
    for outcome in (
        run([completed], "anthropic"),
        run([FIXTURES / name], "anthropic", lenient=True),
    ):
        assert (outcome.state, outcome.attempts[-1].finish_reason) == (state, finish)
        assert snippet in text_of(outcome)


# Captures without `[DONE]` as stored (JSON lines with the framing removed, or a last event with no
# blank line): strict mode retries them; lenient mode, for compatible gateways, finishes them, these
# with a step of tool calls,
LENIENT_TOOL_CALLS = [
    "openai-compatible/alibaba-qwen-tool-call-trailing-empty-delta-vercel-ai.jsonl",
    "openai-compatible/deepseek-reasoning-tool-calls-usage-in-finish-chunk-vercel-ai.jsonl",
    "openai-compatible/mistral-incremental-tool-call-empty-name-continuation-vercel-ai.jsonl",
    "openai-compatible/mistral-tool-call-no-index-finish-same-chunk-vercel-ai.jsonl",
    "openai-compatible/ollama-parallel-tool-calls-whole-args-ask-openai-notes.jsonl",
    "openai-compatible/anthropic-fallback-gateway-tool-call-index-1-vercel-ai.sse",
]
# and these with a stop, their text containing the snippet.
LENIENT_STOP = {
    "openai-compatible/azure-foundry-deepseek-reasoning-matched-stop-vercel-ai.jsonl": "Knicks fans",
    "openai-compatible/azure-async-filter-offsets-chunks-after-finish-semantic-kernel.sse": "Kindness",
    "openai-compatible/azure-ai-inference-phi3-int-stop-reason-usage-every-chunk-semantic-kernel.sse": "Test content",
}
# capture -> (state, finish reason, text snippet) in lenient mode
LENIENT_FINISH: dict[str, tuple[str, str, str]] = {
    **{name: ("awaiting_step", "tool-calls", "") for name in LENIENT_TOOL_CALLS},
    **{name: ("finished", "stop", snippet) for name, snippet in LENIENT_STOP.items()},
}


@pytest.mark.parametrize("name", sorted(LENIENT_FINISH))
def test_capture_without_done_is_retried_strict_and_finished_lenient(name: str) -> None:
    assert EXPECTED[name][:3] == ("retrying", "truncated", "missing_terminal")
    state, finish, snippet = LENIENT_FINISH[name]
    outcome = run([FIXTURES / name], "openai-chat", lenient=True)
    assert (outcome.state, outcome.attempts[-1].finish_reason) == (state, finish)
    assert snippet in text_of(outcome)


def test_deepseek_without_done_finishes_only_when_lenient() -> None:
    name = "openai-compatible/deepseek-finish-length-usage-same-chunk-vercel-ai.jsonl"
    outcome = run([FIXTURES / name], "openai-chat", lenient=True)
    assert (outcome.state, outcome.attempts[-1].finish_reason) == ("finished", "length")
