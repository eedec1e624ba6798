"""Every recorded transcript's expected outcome through `terminus simulate`, and what the simulate
tests share to run one: the fixtures' directory, each fixture's provider, the text of an outcome."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from terminus.events.outbound import TextPart
from terminus.service.cli.simulate import Outcome, simulate

FIXTURES = Path(__file__).parent.parent / "fixtures" / "provider-streams"
PROVIDER_OF_DIR = {
    "anthropic": "anthropic",
    "gemini": "gemini",
    "openai-chat": "openai-chat",
    "openai-compatible": "openai-chat",
    "openai-responses": "openai-responses",
}

# fixture -> (state, outcome of the last attempt, reason or error type, finish reason, text snippet)
EXPECTED: dict[str, tuple[str, str, str | None, str | None, str]] = {
    "anthropic/error-event-data-overloaded-details-null-vertex-sdk-ts-issue346.json": (
        "retrying", "failed", "provider_unavailable", None, ""),
    "anthropic/error-event-data-overloaded-request-id-gptel-pr1512.json": (
        "retrying", "failed", "provider_unavailable", None, ""),
    "anthropic/error-event-overloaded-sdk-python.sse": (
        "retrying", "failed", "provider_unavailable", None, ""),
    "anthropic/error-event-overloaded-sdk-ts.sse": (
        "retrying", "failed", "provider_unavailable", None, ""),
    "anthropic/http-200-ratelimit-headers-recorded-sdk-python.json": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "anthropic/http-400-input-plus-max-tokens-exceed-context-docker-agent-issue569.json": (
        "retrying", "compaction", "context_overflow", None, ""),
    "anthropic/http-400-invalid-request-recorded-sdk-python.json": (
        "failed", "failed", "unknown", None, ""),
    "anthropic/http-400-prompt-too-long-claude-code-issue12186.json": (
        "retrying", "compaction", "context_overflow", None, ""),
    "anthropic/http-429-headers-issue357.json": ("retrying", "failed", "rate_limit", None, ""),
    "anthropic/http-429-rate-limit-body-cline252.json": (
        "retrying", "failed", "rate_limit", None, ""),
    "anthropic/http-429-rate-limit-error-recorded-sdk-python.json": (
        "retrying", "failed", "rate_limit", None, ""),
    "anthropic/http-529-overloaded-body-2026-claude-code-issue39757.json": (
        "retrying", "failed", "provider_unavailable", None, ""),
    "anthropic/http-529-overloaded-sdk-ts-issue616.json": (
        "retrying", "failed", "provider_unavailable", None, ""),
    "anthropic/max-tokens-mid-tool-input-sdk-python.sse": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "anthropic/refusal-stop-details-sdk-python.sse": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "anthropic/spliced-message-start-synthetic-vercel-ai.jsonl": (
        "retrying", "failed", "provider_unavailable", None, ""),
    "anthropic/text-after-429-retries-recorded-sdk-python.sse": (
        "finished", "finished", None, "stop", "[12345,67890]"),
    "anthropic/text-basic-ping-sdk-python.sse": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "anthropic/text-recorded-fantasy.sse": ("finished", "finished", None, "stop", "Olá!"),
    "anthropic/thinking-tool-use-recorded-fantasy.sse": (
        "awaiting_step", "finished", None, "tool-calls", ""),
    "anthropic/tool-use-input-json-delta-sdk-python.sse": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "anthropic/tool-use-recorded-fantasy.sse": (
        "awaiting_step", "finished", None, "tool-calls", ""),
    "anthropic/truncated-mid-tool-input-tail-litellm-pr32159.partial.sse": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "anthropic/web-search-server-tool-citations-recorded-fantasy.sse": (
        "finished", "finished", None, "stop", "Based on the search results"),
    "bedrock/anthropic-invoke-with-response-stream-recorded-fantasy.decoded.jsonl": (
        "finished", "finished", None, "stop", "How can I help you today?"),
    "bedrock/anthropic-invoke-with-response-stream-recorded-fantasy.eventstream": (
        "finished", "finished", None, "stop", "How can I help you today?"),
    "bedrock/converse-stream-reasoning-vercel-ai.jsonl": (
        "finished", "finished", None, "stop", "There are **3** r's"),
    "bedrock/converse-stream-text-vercel-ai.jsonl": (
        "finished", "finished", None, "stop", 'Let me count the "r"s'),
    "gemini/function-call-recorded-fantasy.sse": (
        "awaiting_step", "finished", None, "tool-calls", ""),
    "gemini/http-429-resource-exhausted-retryinfo-langextract-issue50.json": (
        "retrying", "failed", "rate_limit", None, ""),
    "gemini/multi-chunk-text-recorded-fantasy.sse": (
        "finished", "finished", None, "stop", "The weather in Florence"),
    "gemini/text-stop-curl-simonw-llm-gemini-issue97.sse": (
        "finished", "finished", None, "stop", "Here you go!"),
    "gemini/text-stop-recorded-fantasy.sse": ("finished", "finished", None, "stop", "Olá!"),
    "gemini/vertex-streaming-function-call-partial-args-vercel-ai.jsonl": (
        "awaiting_step", "finished", None, "tool-calls", ""),
    "openai-chat/finish-length-usage-done-openai-python.sse": (
        "finished", "finished", None, "length", '{"'),
    "openai-chat/http-400-context-length-exceeded-chat-code-issue17.json": (
        "retrying", "compaction", "context_overflow", None, ""),
    "openai-chat/multiple-choices-n3-openai-python.sse": (
        "finished", "finished", None, "stop", '{"city":"San Francisco"'),
    "openai-chat/parallel-tool-calls-openai-python.sse": (
        "awaiting_step", "finished", None, "tool-calls", ""),
    "openai-chat/ratelimit-headers-documented-sample-openai-docs.json": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "openai-chat/ratelimit-headers-observed-open-webui-issue3743.json": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "openai-chat/refusal-deltas-openai-python.sse": (
        "finished", "finished", None, "stop", "I'm sorry, I can't assist"),
    "openai-chat/text-stop-usage-done-recorded-fantasy.sse": (
        "finished", "finished", None, "stop", "Olá!"),
    "openai-chat/tool-calls-usage-done-recorded-fantasy.sse": (
        "awaiting_step", "finished", None, "tool-calls", ""),
    "openai-compatible/deepseek-finish-length-usage-same-chunk-vercel-ai.jsonl": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "openai-compatible/groq-ratelimit-headers-documented.json": (
        "retrying", "failed", "rate_limit", None, ""),
    "openai-compatible/groq-text-usage-recorded-fantasy.sse": (
        "finished", "finished", None, "stop", "Olá!"),
    "openai-compatible/llama-cpp-gpt-oss-reasoning-timings-recorded-fantasy.sse": (
        "finished", "finished", None, "stop", "Olá!"),
    "openai-compatible/openrouter-text-comment-lines-recorded-fantasy.sse": (
        "finished", "finished", None, "stop", "How can I help you today?"),
    "openai-compatible/xai-grok-usage-in-final-chunk-recorded-fantasy.sse": (
        "finished", "finished", None, "stop", "Olá!"),
    "openai-responses/completed-template-codex.json": (
        "retrying", "truncated", "empty_stop", None, ""),
    "openai-responses/error-event-then-failed-insufficient-quota-vercel-ai.jsonl": (
        "failed", "failed", "budget", None, ""),
    "openai-responses/failed-context-length-exceeded-codex.sse": (
        "retrying", "compaction", "context_overflow", None, ""),
    "openai-responses/failed-insufficient-quota-codex.sse": (
        "failed", "failed", "budget", None, ""),
    "openai-responses/failed-rate-limit-exceeded-codex.sse": (
        "retrying", "failed", "rate_limit", None, ""),
    "openai-responses/function-call-recorded-fantasy.sse": (
        "awaiting_step", "finished", None, "tool-calls", ""),
    "openai-responses/http-400-context-length-exceeded-responses-codex-issue20866.json": (
        "retrying", "compaction", "context_overflow", None, ""),
    "openai-responses/http-429-headers-openai-node-issue1477.json": (
        "retrying", "failed", "rate_limit", None, ""),
    "openai-responses/http-error-insufficient-quota-body-vercel-ai.json": (
        "failed", "failed", "budget", None, ""),
    "openai-responses/incomplete-max-output-tokens-vercel-ai-test.sse": (
        "finished", "finished", None, "length", "Hello,"),
    "openai-responses/reasoning-summary-function-call-recorded-fantasy.sse": (
        "awaiting_step", "finished", None, "tool-calls", ""),
    "openai-responses/stream-ends-before-completed-codex-incomplete_sse.json": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "openai-responses/stream-ends-before-completed-codex-incomplete_sse.rendered.sse": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "openai-responses/text-completed-recorded-fantasy.sse": (
        "finished", "finished", None, "stop", "Oi!"),
    # The second collection (issue 14): gateways, cuts, blocks, refusals and errors.
    "anthropic/api-error-500-claude-code-issue-12264.json": (
        "retrying", "failed", "provider_unavailable", None, ""),
    "anthropic/api-error-mid-stream-litellm-issue-4562.sse": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "anthropic/citations-delta-plaintext-document-rig.sse": (
        "finished", "finished", None, "stop", "Rust focuses on three goals:"),
    "anthropic/invalid-request-400-effort-pydantic-ai.json": (
        "failed", "failed", "unknown", None, ""),
    "anthropic/max-tokens-truncated-haiku-rig.sse": (
        "finished", "finished", None, "length", "alpha"),
    "anthropic/not-found-404-streaming-connect-rig.json": (
        "failed", "failed", "unknown", None, ""),
    "anthropic/overloaded-error-event-gptel-pr-1512.jsonl": (
        "retrying", "failed", "provider_unavailable", None, ""),
    "anthropic/pause-turn-web-search-pydantic-ai.sse": (
        "finished", "finished", None, "other", "I'll run these searches one "),
    "anthropic/redacted-thinking-rig.sse": (
        "finished", "finished", None, "stop", "OK"),
    "anthropic/refusal-stop-details-cyber-vercel-ai.jsonl": (
        "finished", "finished", None, "content-filter", ""),
    "anthropic/request-too-large-413-sdk-python-issue-938.json": (
        "retrying", "compaction", "context_overflow", None, ""),
    "bedrock/converse-stream-redacted-reasoning-pydantic-ai.eventstream": (
        "finished", "finished", None, "stop", "I notice you've sent what ap"),
    "bedrock/converse-stream-text-nova-lite-rig.eventstream": (
        "finished", "finished", None, "stop", "cedar"),
    "bedrock/converse-stream-text-nova-lite-rig.jsonl": (
        "finished", "finished", None, "stop", "cedar"),
    "bedrock/end-of-life-model-404-rig.json": (
        "failed", "failed", "unknown", None, ""),
    "bedrock/invalid-model-id-400-converse-stream-pydantic-ai.json": (
        "failed", "failed", "unknown", None, ""),
    "bedrock/invoke-stream-anthropic-tool-use-fantasy.eventstream": (
        "awaiting_step", "finished", None, "tool-calls", ""),
    "bedrock/on-demand-throughput-unsupported-400-rig.json": (
        "failed", "failed", "unknown", None, ""),
    "bedrock/unsupported-for-streaming-400-mac-client-issue-112.json": (
        "failed", "failed", "unknown", None, ""),
    "gemini/error-mid-stream-cancelled-vertex-firebase-testdata.sse": (
        "retrying", "failed", "provider_unavailable", None, ""),
    "gemini/finish-recitation-no-content-firebase-testdata.sse": (
        "finished", "finished", None, "content-filter", "text1text2text3text4text5tex"),
    "gemini/finish-safety-stream-vertex-firebase-testdata.sse": (
        "finished", "finished", None, "content-filter", "<redacted>"),
    "gemini/json-array-thought-parts-llm-gemini.json": (
        "finished", "finished", None, "stop", "Scoop"),
    "gemini/malformed-function-call-finish-message-vercel-ai-test.sse": (
        "retrying", "truncated", "empty_other", None, ""),
    "gemini/max-tokens-stream-rig.sse": (
        "finished", "finished", None, "length", "Thomas, the lighthouse keepe"),
    "gemini/prompt-feedback-block-model-armor-vertex-pydantic-ai.json": (
        "finished", "finished", None, "content-filter", ""),
    "gemini/prompt-feedback-block-safety-firebase-testdata.sse": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "gemini/prompt-feedback-prohibited-content-gemini-3-7-flash-vercel-ai-issue-19758.jsonl": (
        "finished", "finished", None, "content-filter", ""),
    "gemini/prompt-feedback-prohibited-content-vercel-ai-issue-4236.jsonl": (
        "finished", "finished", None, "content-filter", ""),
    "gemini/quota-exceeded-429-vertex-firebase-testdata.json": (
        "retrying", "failed", "rate_limit", None, ""),
    "gemini/thought-parts-two-terminal-code-execution-rig.sse": (
        "finished", "finished", None, "stop", "Here is the first execution:"),
    "gemini/unavailable-503-high-demand-continue-issue-10639.json": (
        "retrying", "failed", "provider_unavailable", None, ""),
    "gemini/unavailable-503-overloaded-lobehub-issue-9728.json": (
        "retrying", "failed", "provider_unavailable", None, ""),
    "gemini/unknown-model-404-firebase-testdata.json": (
        "failed", "failed", "unknown", None, ""),
    "gemini/user-location-unsupported-400-vertex-firebase-testdata.json": (
        "failed", "failed", "unknown", None, ""),
    "openai-chat/cut-mid-line-function-call-read-boundary-lucgagan-completions-issue15.sse": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "openai-chat/reasoning-only-empty-content-finish-length-recorded-mirascope.sse": (
        "finished", "finished", None, "length", ""),
    "openai-chat/text-stop-usage-then-moderation-chunk-recorded-pydantic-ai.sse": (
        "finished", "finished", None, "stop", "Paris."),
    "openai-chat/tool-call-named-tool-choice-finish-stop-recorded-mirascope.sse": (
        "awaiting_step", "finished", None, "tool-calls", ""),
    "openai-compatible/alibaba-qwen-tool-call-trailing-empty-delta-vercel-ai.jsonl": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "openai-compatible/anthropic-fallback-gateway-tool-call-index-1-vercel-ai.sse": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "openai-compatible/avian-kimi-tool-calls-duplicate-finish-chunks-recorded-fantasy.sse": (
        "awaiting_step", "finished", None, "tool-calls", ""),
    "openai-compatible/azure-ai-inference-phi3-int-stop-reason-usage-every-chunk-semantic-kernel.sse": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "openai-compatible/azure-async-filter-offsets-chunks-after-finish-semantic-kernel.sse": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "openai-compatible/azure-foundry-deepseek-reasoning-matched-stop-vercel-ai.jsonl": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "openai-compatible/azure-http-400-content-filter-inner-error-variant-browser-use-issue262.json": (
        "failed", "failed", "unknown", None, ""),
    "openai-compatible/azure-http-400-content-filter-jailbreak-innererror-tinytroupe-issue85.json": (
        "failed", "failed", "unknown", None, ""),
    "openai-compatible/azure-http-429-no-retry-after-reset-tokens-header-openai-python-issue937.partial.json": (
        "retrying", "failed", "rate_limit", None, ""),
    "openai-compatible/azure-tool-calls-content-filter-results-recorded-fantasy.sse": (
        "awaiting_step", "finished", None, "tool-calls", ""),
    "openai-compatible/deepseek-reasoning-tool-calls-usage-in-finish-chunk-vercel-ai.jsonl": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "openai-compatible/groq-event-error-tool-use-failed-midstream-recorded-pydantic-ai.sse": (
        "failed", "failed", "unknown", None, ""),
    "openai-compatible/groq-http-400-tool-use-failed-failed-generation-recorded-pydantic-ai.json": (
        "failed", "failed", "unknown", None, ""),
    "openai-compatible/litellm-http-429-throttling-error-wrapping-azure-tinyllm-issue17.json": (
        "failed", "failed", "rate_limit", None, ""),
    "openai-compatible/mistral-incremental-tool-call-empty-name-continuation-vercel-ai.jsonl": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "openai-compatible/mistral-tool-call-no-index-finish-same-chunk-vercel-ai.jsonl": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "openai-compatible/ollama-parallel-tool-calls-whole-args-ask-openai-notes.jsonl": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "openai-compatible/openarc-no-finish-no-done-curl18-openarc-issue21.sse": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "openai-compatible/openrouter-gemini-tool-calls-native-stop-recorded-fantasy.sse": (
        "awaiting_step", "finished", None, "tool-calls", ""),
    "openai-compatible/openrouter-http-402-fewer-max-tokens-doka-site-issue7.json": (
        "failed", "failed", "budget", None, ""),
    "openai-compatible/openrouter-http-429-capacity-exhausted-availability-openrouter-docs.json": (
        "retrying", "failed", "rate_limit", None, ""),
    "openai-compatible/openrouter-http-429-provider-returned-error-recorded-pydantic-ai.json": (
        "retrying", "failed", "rate_limit", None, ""),
    "openai-compatible/openrouter-length-then-error-chunk-token-limit-recorded-pydantic-ai.sse": (
        "failed", "failed", "unknown", None, ""),
    "openai-compatible/openrouter-midstream-error-429-typed-finish-error-openrouter-docs.sse": (
        "retrying", "failed", "rate_limit", None, ""),
    "openai-compatible/openrouter-midstream-error-string-code-finish-error-openrouter-docs.sse": (
        "retrying", "failed", "provider_unavailable", None, ""),
    "openai-compatible/openrouter-nonstream-choice-finish-error-object-openrouter-docs.json": (
        "retrying", "failed", "provider_unavailable", None, ""),
    "openai-compatible/sglang-error-chunk-context-length-in-200-stream-litellm-issue25492.sse": (
        "retrying", "compaction", "context_overflow", None, ""),
    "openai-compatible/snowflake-cortex-no-finish-reason-recorded-pydantic-ai.sse": (
        "retrying", "truncated", "missing_terminal", None, ""),
    "openai-compatible/vercel-gateway-provider-fallback-metadata-recorded-fantasy.sse": (
        "finished", "finished", None, "stop", "The sum is 5 and the product"),
    "openai-compatible/vllm-crusoe-text-stop-usage-recorded-pydantic-ai.sse": (
        "finished", "finished", None, "stop", "1, 2, 3, 4, 5"),
    "openai-compatible/vllm-http-400-context-length-flat-object-error-vllm-issue20409.json": (
        "retrying", "compaction", "context_overflow", None, ""),
    "openai-compatible/vllm-qwen-tool-call-name-only-first-delta-ask-openai-notes.sse": (
        "awaiting_step", "finished", None, "tool-calls", ""),
    "openai-compatible/zai-glm-reasoning-tool-call-no-finish-key-until-end-recorded-fantasy.sse": (
        "awaiting_step", "finished", None, "tool-calls", ""),
    "openai-responses/azure-content-filters-completed-vercel-ai.jsonl": (
        "finished", "finished", None, "stop", "Hello"),
    "openai-responses/azure-gateway-gpt-5-mini-fantasy.sse": (
        "finished", "finished", None, "stop", "Olá!"),
    "openai-responses/bare-error-object-in-stream-codex-cliproxyapi-issue-1006.jsonl": (
        "retrying", "failed", "provider_unavailable", None, ""),
    "openai-responses/chat-style-error-frame-omniroute-issue-13431.jsonl": (
        "failed", "failed", "unknown", None, ""),
    "openai-responses/error-event-server-error-codex-pi-issue-4092.jsonl": (
        "retrying", "failed", "provider_unavailable", None, ""),
    "openai-responses/github-copilot-rotating-item-ids-vercel-ai.jsonl": (
        "finished", "finished", None, "stop", "There are **3** letter **“r”"),
    "openai-responses/incomplete-mid-tool-call-rig.sse": (
        "finished", "finished", None, "length", ""),
    "openai-responses/incomplete-reasoning-only-gpt-5-nano-rig.sse": (
        "finished", "finished", None, "length", ""),
    "openai-responses/invalid-temperature-400-pydantic-ai.json": (
        "failed", "failed", "unknown", None, ""),
    "openai-responses/litellm-in-stream-error-duplicate-type-codex-router-issue-837.jsonl": (
        "retrying", "failed", "provider_unavailable", None, ""),
    "openai-responses/refusal-delta-structured-output-rig.sse": (
        "finished", "finished", None, "stop", "I'm sorry, I can't assist wi"),
}  # fmt: skip


def provider_of(name: str) -> str:
    directory, file = name.split("/", 1)
    if directory == "bedrock":
        return "bedrock-converse" if "converse" in file else "bedrock"
    return PROVIDER_OF_DIR[directory]


def run(paths: list[Path], provider: str, **options: Any) -> Outcome:
    return simulate(paths, provider=provider, **options)


def text_of(outcome: Outcome) -> str:
    if outcome.message is None:
        return ""
    return "".join(p.text for p in outcome.message.parts if isinstance(p, TextPart))


def write(directory: Path, text: str, name: str) -> Path:
    path = directory / name
    path.write_text(text)
    return path
