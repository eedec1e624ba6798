"""The names a span carries: OpenTelemetry's GenAI semantic conventions and terminus's own.

The `gen_ai.*` and `error.type` names are those of opentelemetry-semantic-conventions 0.66b2
(schema https://opentelemetry.io/schemas/1.44.0), the version the `otel` extra pins;
tests/unit/test_traces_vocabulary.py checks each against that package when it is installed.
The `terminus.*` names are ours: what no convention describes (an attempt that was cut, why
it was discarded, the retry that followed).
"""

from __future__ import annotations

from typing import Final

SCHEMA_URL: Final = "https://opentelemetry.io/schemas/1.44.0"
SEMCONV_VERSION: Final = "0.66b2"

OPERATION: Final = "gen_ai.operation.name"
CONVERSATION: Final = "gen_ai.conversation.id"
PROVIDER: Final = "gen_ai.provider.name"
REQUEST_MODEL: Final = "gen_ai.request.model"
FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
REASONING_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
CACHE_READ_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
CACHE_WRITE_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
ERROR_TYPE: Final = "error.type"

# gen_ai.operation.name values (GenAiOperationNameValues)
INVOKE_AGENT: Final = "invoke_agent"
CHAT: Final = "chat"
EXECUTE_TOOL: Final = "execute_tool"

TURN_ID: Final = "terminus.turn.id"
TURN_STATE: Final = "terminus.turn.state"
STOP_REASON: Final = "terminus.turn.stop_reason"
TURN_ATTEMPTS: Final = "terminus.turn.attempts"
STEP: Final = "terminus.step"
ATTEMPT: Final = "terminus.attempt"
OUTCOME: Final = "terminus.attempt.outcome"
OUTCOME_REASON: Final = "terminus.attempt.reason"
RAW_PROVIDER: Final = "terminus.provider"
RETRY_EVENT: Final = "terminus.retry_scheduled"
RETRY_DELAY: Final = "terminus.retry.delay_ms"
RETRY_REASON: Final = "terminus.retry.reason"
RETRY_ATTEMPT: Final = "terminus.retry.attempt"
COMPACTION_EVENT: Final = "terminus.compaction_required"

# terminus provider -> gen_ai.provider.name (GenAiProviderNameValues of the pinned version);
# a provider not listed is written as terminus names it (the convention allows custom values),
# an OpenAI-compatible one by the name after its colon.
PROVIDER_NAMES: Final[dict[str, str]] = {
    "anthropic": "anthropic",
    "openai-responses": "openai",
    "openai-chat": "openai",
    "openai-chat:azure": "azure.ai.openai",
    "openai-chat:deepseek": "deepseek",
    "openai-chat:gemini": "gcp.gemini",
    "openai-chat:groq": "groq",
    "openai-chat:mistral": "mistral_ai",
    "openai-chat:xai": "x_ai",
    "gemini": "gcp.gemini",
    "bedrock": "aws.bedrock",
    "bedrock-converse": "aws.bedrock",
}


def provider_name(provider: str) -> str:
    """The `gen_ai.provider.name` of a terminus provider."""
    return PROVIDER_NAMES.get(provider, provider.rpartition(":")[2])
