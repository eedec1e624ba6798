"""Every error type, code, status and exception each provider documents -> our error type.

Rows come from the providers' SDK type definitions and service models; a test enumerates them
(tests/unit/test_provider_vocabulary.py) and fails on a value with no row here. Whether an error
is retryable follows from its type (`rate_limit` and `provider_unavailable` are), unless the
`x-llm-error-retryable` or `x-should-retry` header says otherwise (statemachines/classify.py).
Keys are matched case-insensitively: Bedrock names the same exception `throttlingException` in a
stream and `ThrottlingException` in an HTTP error.
"""

from __future__ import annotations

from typing import Final

from terminus.events.errors import ErrorType

# anthropic.types ErrorObject: the `error.type` of an Anthropic error body or `error` event.
ANTHROPIC_ERROR_TYPES: Final[dict[str, ErrorType]] = {
    "invalid_request_error": "unknown",
    "authentication_error": "auth",
    "billing_error": "budget",
    "permission_error": "auth",
    "not_found_error": "unknown",
    "rate_limit_error": "rate_limit",
    "timeout_error": "provider_unavailable",
    "api_error": "provider_unavailable",
    "overloaded_error": "provider_unavailable",
    "request_too_large": "context_overflow",
}

# openai.types.responses.ResponseError.code (`response.failed`), plus the Chat Completions and
# HTTP error codes OpenAI documents for the same conditions.
OPENAI_ERROR_CODES: Final[dict[str, ErrorType]] = {
    "server_error": "provider_unavailable",
    "rate_limit_exceeded": "rate_limit",
    "invalid_prompt": "unknown",
    "data_residency_mismatch": "unknown",
    "bio_policy": "unknown",
    "misalignment_policy_violation": "unknown",
    "vector_store_timeout": "provider_unavailable",
    "invalid_image": "unknown",
    "invalid_image_format": "unknown",
    "invalid_base64_image": "unknown",
    "invalid_image_url": "unknown",
    "image_too_large": "unknown",
    "image_too_small": "unknown",
    "image_parse_error": "unknown",
    "image_content_policy_violation": "unknown",
    "invalid_image_mode": "unknown",
    "image_file_too_large": "unknown",
    "unsupported_image_media_type": "unknown",
    "empty_image_file": "unknown",
    "failed_to_download_image": "unknown",
    "image_file_not_found": "unknown",
    "context_length_exceeded": "context_overflow",
    "insufficient_quota": "budget",
    "billing_hard_limit_reached": "budget",
    "invalid_api_key": "auth",
    "invalid_authentication": "auth",
    "service_unavailable": "provider_unavailable",
}

# Transient codes that gateways and compatible servers put in in-band errors (OpenRouter,
# LiteLLM, vLLM, Azure). A transient code decides over a generic `type` such as
# `invalid_request_error`: the code names the condition, the type only its family.
TRANSIENT_CODES: Final[dict[str, ErrorType]] = {
    "request_timeout": "provider_unavailable",
    "timeout": "provider_unavailable",
    "gateway_timeout": "provider_unavailable",
    "bad_gateway": "provider_unavailable",
    "internal_error": "provider_unavailable",
    "internal_server_error": "provider_unavailable",
    "overloaded": "provider_unavailable",
    "upstream_error": "provider_unavailable",
    "rate_limited": "rate_limit",
    "too_many_requests": "rate_limit",
}

# google.rpc.Code names: the `error.status` of Gemini and Vertex AI error bodies.
GEMINI_STATUSES: Final[dict[str, ErrorType]] = {
    "OK": "unknown",
    "CANCELLED": "provider_unavailable",
    "UNKNOWN": "provider_unavailable",
    "INVALID_ARGUMENT": "unknown",
    "DEADLINE_EXCEEDED": "provider_unavailable",
    "NOT_FOUND": "unknown",
    "ALREADY_EXISTS": "unknown",
    "PERMISSION_DENIED": "auth",
    "UNAUTHENTICATED": "auth",
    "RESOURCE_EXHAUSTED": "rate_limit",
    "FAILED_PRECONDITION": "unknown",
    "ABORTED": "provider_unavailable",
    "OUT_OF_RANGE": "unknown",
    "UNIMPLEMENTED": "unknown",
    "INTERNAL": "provider_unavailable",
    "UNAVAILABLE": "provider_unavailable",
    "DATA_LOSS": "provider_unavailable",
}

# botocore bedrock-runtime error shapes, the same in an HTTP error (`x-amzn-errortype`) and in a
# ConverseStream or InvokeModelWithResponseStream exception event.
BEDROCK_EXCEPTIONS: Final[dict[str, ErrorType]] = {
    "AccessDeniedException": "auth",
    "ConflictException": "unknown",
    "InternalServerException": "provider_unavailable",
    "ModelErrorException": "provider_unavailable",
    "ModelNotReadyException": "provider_unavailable",
    "ModelStreamErrorException": "provider_unavailable",
    "ModelTimeoutException": "provider_unavailable",
    "ResourceNotFoundException": "unknown",
    "ServiceQuotaExceededException": "budget",
    "ServiceUnavailableException": "provider_unavailable",
    "ThrottlingException": "rate_limit",
    "ValidationException": "unknown",
}

ERROR_KINDS: Final[dict[str, ErrorType]] = {
    key.lower(): value
    for table in (
        ANTHROPIC_ERROR_TYPES,
        OPENAI_ERROR_CODES,
        TRANSIENT_CODES,
        GEMINI_STATUSES,
        BEDROCK_EXCEPTIONS,
    )
    for key, value in table.items()
}


def kind_type(kind: object) -> ErrorType | None:
    """Our error type for one provider error type, code, status or exception name."""
    return ERROR_KINDS.get(kind.lower()) if isinstance(kind, str) else None
