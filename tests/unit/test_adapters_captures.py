"""The second collection of captures (issue 14) through their adapters: what each stream yields.

Each row was read off the adapter and checked against what the capture shows (SOURCES.md, "Second
collection"); the turn-level outcome of every capture is its row in simulated_fixtures.py.
"""

from __future__ import annotations

import pytest
from test_adapters_support import Expect, ToolTuple, assert_outcome, run_fixture

STOP = "message_stop"
MESSAGE_STOP = "messageStop"
DONE = "[DONE]"
COMPLETED = "response.completed"
INCOMPLETE = "response.incomplete"
FLORENCE = {"location": "Florence, Italy"}
FLORENCE_NO_SPACE = {"location": "Florence,Italy"}
SAN_FRANCISCO = {"location": "San Francisco"}
BEDROCK_WEATHER = ("toolu_bdrk_01J3qB12vH7tghDJ74pNzgp8", "weather", FLORENCE)
BERLIN_SEARCH: ToolTuple = (
    "chatcmpl-tool-9f149c74c42f265b",
    "webSearchTool",
    {"query": "current Berlin weather"},
)
BOOK: ToolTuple = (
    "call_sigJkGcvZrYCOQPEbptSxluC",
    "__mirascope_formatted_output_tool__",
    {
        "title": "THE NAME OF THE WIND",
        "author": {"first_name": "Patrick", "last_name": "Rothfuss"},
        "rating": 7,
    },
)


# The eleven server-side searches of the pause-turn capture, in the order they were made.
PAUSE_TURN_QUERIES = {
    "srvtoolu_01FGPZ2P6yPXWdiD1Cxjpix3": "San Francisco weather today",
    "srvtoolu_01FFhqUX7uk2uakLEqo1v9D2": "San Francisco sunrise time today",
    "srvtoolu_01Qu6xumZrwPeBQYGdawQUMS": "Golden Gate Bridge traffic today",
    "srvtoolu_01JjHpcj7RERHyZgH3QmUv4i": "San Francisco air quality today",
    "srvtoolu_01MWxzBCgoNxNjk5DiMqLv9u": "San Francisco events this week",
    "srvtoolu_01Uu9K4fi2aJbym3jd797DPa": "San Francisco ferry schedule today",
    "srvtoolu_01BTRCcGdMQbeAviLraoxoXq": "prevailing information on quantum computing today",
    "srvtoolu_01NV7iQ8LzvPYQpa5Kwy8HB5": "latest news on the stock market today",
    "srvtoolu_01Ewz8JuxwuYL5wDNADGeEFL": "latest news on the weather in San Francisco today",
    "srvtoolu_012kdkr4fhMUVKKXVWqaunrP": "latest news on the traffic in San Francisco today",
    "srvtoolu_01NKrV3hGbcHeBVtaTKBHRuA": "latest news on the air quality in San Francisco today",
}
PAUSE_TURN_SEARCHES = tuple(
    (call_id, "web_search", {"query": query}) for call_id, query in PAUSE_TURN_QUERIES.items()
)

CASES: dict[str, Expect] = {
    "anthropic/api-error-mid-stream-litellm-issue-4562.sse": Expect(),
    "anthropic/citations-delta-plaintext-document-rig.sse": Expect(
        text="Rust focuses on three goals: *", finish="stop", terminal=STOP
    ),
    "anthropic/max-tokens-truncated-haiku-rig.sse": Expect(
        text="alpha", finish="length", terminal=STOP
    ),
    "anthropic/overloaded-error-event-gptel-pr-1512.jsonl": Expect(error="Overloaded"),
    "anthropic/pause-turn-web-search-pydantic-ai.sse": Expect(
        text="I'll run these searches one at",
        reasoning="The user wants me to run a ser",
        tools=PAUSE_TURN_SEARCHES,
        finish="other",
        terminal=STOP,
    ),
    "anthropic/redacted-thinking-rig.sse": Expect(text="OK", finish="stop", terminal=STOP),
    "anthropic/refusal-stop-details-cyber-vercel-ai.jsonl": Expect(
        finish="content-filter", terminal=STOP
    ),
    "bedrock/converse-stream-redacted-reasoning-pydantic-ai.eventstream": Expect(
        text="I notice you've sent what appe", finish="stop", terminal=MESSAGE_STOP
    ),
    "bedrock/converse-stream-text-nova-lite-rig.eventstream": Expect(
        text="cedar", finish="stop", terminal=MESSAGE_STOP
    ),
    "bedrock/converse-stream-text-nova-lite-rig.jsonl": Expect(
        text="cedar", finish="stop", terminal=MESSAGE_STOP
    ),
    "bedrock/invoke-stream-anthropic-tool-use-fantasy.eventstream": Expect(
        tools=(BEDROCK_WEATHER,), finish="tool-calls", terminal=STOP
    ),
    "gemini/error-mid-stream-cancelled-vertex-firebase-testdata.sse": Expect(
        text="First Second", error="The operation was cancelled."
    ),
    "gemini/finish-recitation-no-content-firebase-testdata.sse": Expect(
        text="text1text2text3text4text5text6", finish="content-filter"
    ),
    "gemini/finish-safety-stream-vertex-firebase-testdata.sse": Expect(
        text="<redacted>", finish="content-filter"
    ),
    "gemini/malformed-function-call-finish-message-vercel-ai-test.sse": Expect(finish="other"),
    "gemini/max-tokens-stream-rig.sse": Expect(
        text="Thomas, the lighthouse keeper,", finish="length"
    ),
    "gemini/prompt-feedback-block-safety-firebase-testdata.sse": Expect(),
    "gemini/prompt-feedback-prohibited-content-gemini-3-7-flash-vercel-ai-issue-19758.jsonl": Expect(
        finish="content-filter"
    ),
    "gemini/prompt-feedback-prohibited-content-vercel-ai-issue-4236.jsonl": Expect(
        finish="content-filter"
    ),
    "gemini/thought-parts-two-terminal-code-execution-rig.sse": Expect(
        text="Here is the first execution:", reasoning="**Calculating the Digits**", finish="stop"
    ),
    "openai-chat/cut-mid-line-function-call-read-boundary-lucgagan-completions-issue15.sse": Expect(),
    "openai-chat/reasoning-only-empty-content-finish-length-recorded-mirascope.sse": Expect(
        finish="length", terminal=DONE
    ),
    "openai-chat/text-stop-usage-then-moderation-chunk-recorded-pydantic-ai.sse": Expect(
        text="Paris.", finish="stop", terminal=DONE
    ),
    "openai-chat/tool-call-named-tool-choice-finish-stop-recorded-mirascope.sse": Expect(
        tools=(BOOK,), finish="stop", terminal=DONE
    ),
    "openai-compatible/alibaba-qwen-tool-call-trailing-empty-delta-vercel-ai.jsonl": Expect(
        tools=(("call_eee11723464a4b9eb8cee71d", "weather", SAN_FRANCISCO),), finish="tool-calls"
    ),
    "openai-compatible/anthropic-fallback-gateway-tool-call-index-1-vercel-ai.sse": Expect(
        text="Reading it.",
        tools=(("toolu_sanitized", "read_file", {"path": "a.txt"}),),
        finish="tool-calls",
    ),
    "openai-compatible/avian-kimi-tool-calls-duplicate-finish-chunks-recorded-fantasy.sse": Expect(
        text="  ",
        reasoning="The user is asking for the wea",
        tools=(("functions.weather:0", "weather", FLORENCE_NO_SPACE),),
        finish="tool-calls",
        terminal=DONE,
    ),
    "openai-compatible/azure-ai-inference-phi3-int-stop-reason-usage-every-chunk-semantic-kernel.sse": Expect(
        text="Test content", finish="stop"
    ),
    "openai-compatible/azure-async-filter-offsets-chunks-after-finish-semantic-kernel.sse": Expect(
        text="Kindness", finish="stop"
    ),
    "openai-compatible/azure-foundry-deepseek-reasoning-matched-stop-vercel-ai.jsonl": Expect(
        text="Exciting news, Knicks fans—the",
        reasoning="We need to invent a new holida",
        finish="stop",
    ),
    "openai-compatible/azure-tool-calls-content-filter-results-recorded-fantasy.sse": Expect(
        tools=(("call_tWA8BJziGlCyhQEXhEHn6eXK", "weather", FLORENCE),),
        finish="tool-calls",
        terminal=DONE,
    ),
    "openai-compatible/deepseek-reasoning-tool-calls-usage-in-finish-chunk-vercel-ai.jsonl": Expect(
        reasoning="The user is asking for the wea",
        tools=(("call_00_ioIn7yN9p1ZOMNpDLwd4MgAF", "weather", SAN_FRANCISCO),),
        finish="tool-calls",
    ),
    "openai-compatible/groq-event-error-tool-use-failed-midstream-recorded-pydantic-ai.sse": Expect(
        reasoning="We need to call the tool with ", error="Tool call validation failed: tool call v"
    ),
    "openai-compatible/mistral-incremental-tool-call-empty-name-continuation-vercel-ai.jsonl": Expect(
        tools=(BERLIN_SEARCH,), finish="tool-calls"
    ),
    "openai-compatible/mistral-tool-call-no-index-finish-same-chunk-vercel-ai.jsonl": Expect(
        tools=(("gSIMJiOkT", "weather", SAN_FRANCISCO),), finish="tool-calls"
    ),
    "openai-compatible/ollama-parallel-tool-calls-whole-args-ask-openai-notes.jsonl": Expect(
        tools=(
            ("call_wteop8bt", "run_command", {"command": "ls"}),
            ("call_rk2xye1l", "run_command", {"command": "ls -l"}),
        ),
        finish="tool-calls",
    ),
    "openai-compatible/openarc-no-finish-no-done-curl18-openarc-issue21.sse": Expect(
        text="Happy, creative day"
    ),
    "openai-compatible/openrouter-gemini-tool-calls-native-stop-recorded-fantasy.sse": Expect(
        tools=(("tool_weather_nNBvDVuJXrZZDwEjuOoj", "weather", FLORENCE),),
        finish="tool-calls",
        terminal=DONE,
    ),
    "openai-compatible/openrouter-length-then-error-chunk-token-limit-recorded-pydantic-ai.sse": Expect(
        reasoning="We need to respond to a greeti", error="Token limit reached"
    ),
    "openai-compatible/openrouter-midstream-error-429-typed-finish-error-openrouter-docs.sse": Expect(
        error="Rate limit exceeded"
    ),
    "openai-compatible/openrouter-midstream-error-string-code-finish-error-openrouter-docs.sse": Expect(
        error="Provider disconnected unexpectedly"
    ),
    "openai-compatible/sglang-error-chunk-context-length-in-200-stream-litellm-issue25492.sse": Expect(
        error="Requested token count exceeds the model'"
    ),
    "openai-compatible/snowflake-cortex-no-finish-reason-recorded-pydantic-ai.sse": Expect(
        text="4", terminal=DONE
    ),
    "openai-compatible/vercel-gateway-provider-fallback-metadata-recorded-fantasy.sse": Expect(
        text="The sum is 5 and the product i", finish="stop", terminal=DONE
    ),
    "openai-compatible/vllm-crusoe-text-stop-usage-recorded-pydantic-ai.sse": Expect(
        text="1, 2, 3, 4, 5", finish="stop", terminal=DONE
    ),
    "openai-compatible/vllm-qwen-tool-call-name-only-first-delta-ask-openai-notes.sse": Expect(
        tools=(
            ("chatcmpl-tool-ca99dda515524c6abe47d1ea22813507", "run_command", {"command": "ls"}),
        ),
        finish="tool-calls",
        terminal=DONE,
    ),
    "openai-compatible/zai-glm-reasoning-tool-call-no-finish-key-until-end-recorded-fantasy.sse": Expect(
        text="I'll get the current weather i",
        reasoning="The user is asking for the wea",
        tools=(("call_3532c842716b4c72a7dd7498", "weather", FLORENCE_NO_SPACE),),
        finish="tool-calls",
        terminal=DONE,
    ),
    "openai-responses/azure-content-filters-completed-vercel-ai.jsonl": Expect(
        text="Hello", finish="stop", terminal=COMPLETED
    ),
    "openai-responses/azure-gateway-gpt-5-mini-fantasy.sse": Expect(
        text="Olá!", finish="stop", terminal=COMPLETED
    ),
    "openai-responses/bare-error-object-in-stream-codex-cliproxyapi-issue-1006.jsonl": Expect(
        error="stream error: stream ID 17; INTERNAL_ERR"
    ),
    "openai-responses/chat-style-error-frame-omniroute-issue-13431.jsonl": Expect(
        error="[400]: Invalid JSON payload received. Un"
    ),
    "openai-responses/error-event-server-error-codex-pi-issue-4092.jsonl": Expect(
        error="An error occurred while processing your "
    ),
    "openai-responses/github-copilot-rotating-item-ids-vercel-ai.jsonl": Expect(
        text="There are **3** letter **“r”**",
        reasoning="**Counting character occurrenc",
        finish="stop",
        terminal=COMPLETED,
    ),
    "openai-responses/incomplete-mid-tool-call-rig.sse": Expect(
        finish="length", terminal=INCOMPLETE
    ),
    "openai-responses/incomplete-reasoning-only-gpt-5-nano-rig.sse": Expect(
        finish="length", terminal=INCOMPLETE
    ),
    "openai-responses/litellm-in-stream-error-duplicate-type-codex-router-issue-837.jsonl": Expect(
        error="litellm.APIError: Response API in-stream"
    ),
    "openai-responses/refusal-delta-structured-output-rig.sse": Expect(
        text="I'm sorry, I can't assist with", finish="stop", terminal=COMPLETED
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_capture_outcome(name: str) -> None:
    assert_outcome(run_fixture(name), CASES[name])
