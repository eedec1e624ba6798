"""Each compatible provider's documented in-stream error objects and HTTP error bodies, and what
terminus makes of each (issue 32, classes 1 and 3).

For every provider of events/adapters/compat.py DIALECTS: the error objects its stream can carry
after a 200, which must end the attempt with a typed error, and its documented error bodies, which
must be classified as the document says. Values are copied from the documents named beside them
(or from a public capture of tests/fixtures/provider-streams, SOURCES.md). Where a provider
documents no in-stream error object or no error body, the comment says so and names the document
checked; its list is then empty, and the statuses its docs name are listed instead when they do.
"""

from __future__ import annotations

import json
from typing import Any, Final, NamedTuple

import pytest
from test_adapters_support import FIXTURES, payloads_of, run_payloads

from terminus.events.adapters.compat import DIALECTS
from terminus.events.inbound import StreamError
from terminus.statemachines.classify import classify


class Form(NamedTuple):
    """An error as a provider sends it (a body, or a capture's name), and our type for it."""

    status: int | None
    body: Any
    type: str
    retryable: bool


class Forms(NamedTuple):
    stream: tuple[Form, ...]
    bodies: tuple[Form, ...]


def err(message: str, kind: Any = None, code: Any = None, **more: Any) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": code, **more}}


def captured(name: str) -> Any:
    """The body of a recorded HTTP error, or the last payload of a recorded stream (its error)."""
    path = FIXTURES / "openai-compatible" / name
    if path.suffix == ".json":
        return json.loads(path.read_text())["body"]
    if path.suffix == ".sse":
        data = [line[5:] for line in path.read_text().splitlines() if line.startswith("data:")]
        return json.loads([d for d in data if d.strip().startswith("{")][-1])
    return payloads_of(path)[-1]


UNAVAILABLE: Final = ("provider_unavailable", True)
UNKNOWN: Final = ("unknown", False)
AUTH: Final = ("auth", False)
BUDGET: Final = ("budget", False)
RATE: Final = ("rate_limit", True)
OVERFLOW: Final = ("context_overflow", False)


def form(status: int | None, body: Any, expected: tuple[str, bool]) -> Form:
    return Form(status, body, *expected)


def statuses(documented: dict[int, tuple[str, bool]]) -> tuple[Form, ...]:
    """Statuses a provider documents with no body shape: read by the status alone."""
    return tuple(form(status, None, expected) for status, expected in documented.items())


FORMS: Final[dict[str, Forms]] = {
    # mistralai/client-python docs/models/httpvalidationerror.md (422 `{"detail": [...]}`),
    # docs.mistral.ai known limitations (the context message); the flat `{"object": "error"}`
    # of its API. In-stream: none documented (the SDK's CompletionEvent has only `data`).
    "mistral": Forms(
        stream=(),
        bodies=(
            form(422, {"detail": [{"loc": ["body", "model"], "msg": "Field required"}]}, UNKNOWN),
            form(
                400,
                {
                    "object": "error",
                    "message": "Prompt contains 300000 tokens, too large for model with 131072"
                    " maximum context length",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": None,
                },
                OVERFLOW,
            ),
        ),
    ),
    # https://api-docs.deepseek.com/quick_start/error_codes (400 Invalid Format, 401
    # Authentication Fails, 402 Insufficient Balance, 422 Invalid Parameters, 429 Rate Limit
    # Reached, 500 Server Error, 503 Server Overloaded). In-stream: none; an interrupted
    # generation is the finish reason `insufficient_system_resource` (test_compat_providers.py).
    "deepseek": Forms(
        stream=(),
        bodies=(
            form(400, err("Invalid Format", "invalid_request_error"), UNKNOWN),
            form(401, err("Authentication Fails", "authentication_error"), AUTH),
            form(
                402, captured("deepseek-http-402-insufficient-balance-aider-issue4851.json"), BUDGET
            ),
            form(422, err("Invalid Parameters", "invalid_request_error"), UNKNOWN),
            form(429, err("Rate Limit Reached", "rate_limit_error"), RATE),
            form(500, err("Server Error", "server_error"), UNAVAILABLE),
            form(503, err("Server Overloaded", "server_error"), UNAVAILABLE),
        ),
    ),
    # vllm-project/vllm serving `create_error_response` / `create_streaming_error_response`
    # (`{"error": {message, type, param, code}}`; before 0.10 the object came flat). Context
    # overflows: tests/unit/test_local_overflow.py.
    "vllm": Forms(
        stream=(
            form(None, err("Engine loop has died", "InternalServerError", 500), UNAVAILABLE),
            form(None, err("The model `x` does not exist.", "NotFoundError", 404), UNKNOWN),
            form(None, {"object": "error", "message": "boom", "type": "BadRequestError"}, UNKNOWN),
        ),
        bodies=(
            form(404, err("The model `x` does not exist.", "NotFoundError", 404), UNKNOWN),
            form(500, err("Engine loop has died", "InternalServerError", 500), UNAVAILABLE),
            form(501, err("n > 1 is not supported", "NotImplementedError", 501), UNKNOWN),
            form(
                400,
                captured("vllm-http-400-context-length-flat-object-error-vllm-issue20409.json"),
                OVERFLOW,
            ),
        ),
    ),
    # ggml-org/llama.cpp tools/server/server-common.cpp `format_error_response` ({code, message,
    # type}); server-context.cpp sends the same object under `error` as an SSE `data:` line
    # once the stream has begun, and the context overflow with `n_prompt_tokens` and `n_ctx`.
    "llama-cpp": Forms(
        stream=(
            form(
                None,
                {"error": {"code": 500, "message": "boom", "type": "server_error"}},
                UNAVAILABLE,
            ),
            form(
                None,
                {
                    "error": {
                        "code": 400,
                        "message": "the request exceeds the available context size, try"
                        " increasing it",
                        "type": "exceed_context_size_error",
                        "n_prompt_tokens": 4121,
                        "n_ctx": 4096,
                    }
                },
                OVERFLOW,
            ),
        ),
        bodies=(
            form(
                401,
                {
                    "error": {
                        "code": 401,
                        "message": "Invalid API Key",
                        "type": "authentication_error",
                    }
                },
                AUTH,
            ),
            form(
                503,
                {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}},
                UNAVAILABLE,
            ),
            form(
                500,
                captured(
                    "llama-cpp-http-500-context-size-exceeded-server-error-llama-cpp-issue19774.json"
                ),
                OVERFLOW,
            ),
            form(
                400,
                captured("llama-cpp-exceed-context-size-error-body-textgen-issue7257.json"),
                OVERFLOW,
            ),
        ),
    ),
    # ollama/ollama @ fb307609 openai/openai.go `NewError` (400 invalid_request_error, 404
    # not_found_error, else api_error), middleware/openai.go `writeError`: only before the stream
    # (a status other than 200). In-stream: none on /v1/chat/completions. Context overflows:
    # tests/unit/test_local_overflow.py.
    "ollama": Forms(
        stream=(),
        bodies=(
            form(
                404,
                err('model "llama9" not found, try pulling it first', "not_found_error"),
                UNKNOWN,
            ),
            form(500, err("llama runner process has terminated", "api_error"), UNAVAILABLE),
        ),
    ),
    # LM Studio: no API reference page in the docs corpus; its in-stream error is `{"error":
    # <text>}` after a 200 (dyad issue 925, capture). Bodies: none documented.
    "lm-studio": Forms(
        stream=(
            form(
                None,
                captured("lm-studio-stream-error-context-overflow-dyad-issue925.jsonl"),
                OVERFLOW,
            ),
        ),
        bodies=(),
    ),
    # https://console.groq.com/docs/errors; recorded bodies and an `event: error` mid-stream
    # (pydantic-ai cassettes, podscript issue 20; SOURCES.md).
    "groq": Forms(
        stream=(
            form(
                None,
                captured("groq-event-error-tool-use-failed-midstream-recorded-pydantic-ai.sse"),
                UNKNOWN,
            ),
        ),
        bodies=(
            form(
                400,
                captured(
                    "groq-http-400-tool-use-failed-failed-generation-recorded-pydantic-ai.json"
                ),
                UNKNOWN,
            ),
            form(404, captured("groq-http-404-model-not-found-recorded-pydantic-ai.json"), UNKNOWN),
            form(
                413,
                captured("groq-http-413-request-too-large-tpm-podscript-issue20.json"),
                ("rate_limit", False),
            ),
            form(
                498,
                err("Flex tier capacity exceeded", None, "capacity_exceeded"),
                UNAVAILABLE,
            ),
            form(429, err("Rate limit reached for model", "tokens", "rate_limit_exceeded"), RATE),
        ),
    ),
    # https://docs.together.ai/docs/error-codes: statuses only (400, 401, 402, 403, 404, 429,
    # 500, 503), no body shape; its 403 is "Input token count + max_tokens parameter must be less
    # than the context length", which is read so only by its message: TGI's validation message
    # (router/src/validation.rs), as Together sent it (Portkey's error library, together-ai
    # #10151). A bare 403 reads as `auth` (docs/providers.md, "Not covered"). In-stream: none
    # documented.
    "together": Forms(
        stream=(),
        bodies=(
            form(
                403,
                "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4097."
                " Given: 5013 `inputs` tokens and 128 `max_new_tokens`",
                OVERFLOW,
            ),
            *statuses(
                {
                    400: UNKNOWN,
                    401: AUTH,
                    402: BUDGET,
                    404: UNKNOWN,
                    429: RATE,
                    500: UNAVAILABLE,
                    503: UNAVAILABLE,
                }
            ),
        ),
    ),
    # https://fireworks.ai/docs/guides/inference-error-codes (statuses); the envelope
    # `{"error": {object, type, code, message}}` (@ai-sdk/fireworks 2.0.72 changelog).
    # In-stream: none documented.
    "fireworks": Forms(
        stream=(),
        bodies=(
            form(
                404,
                {
                    "error": {
                        "object": "error",
                        "message": "Model not found, inaccessible, and/or not deployed",
                    }
                },
                UNKNOWN,
            ),
            *statuses(
                {
                    400: UNKNOWN,
                    401: AUTH,
                    402: BUDGET,
                    403: AUTH,
                    408: UNAVAILABLE,
                    429: RATE,
                    500: UNAVAILABLE,
                    502: UNAVAILABLE,
                    503: UNAVAILABLE,
                }
            ),
        ),
    ),
    # xAI: no docs.x.ai page in the docs corpus; its 400 `{code, error}` (beeai-framework issue
    # 447, capture). In-stream: none documented.
    "xai": Forms(
        stream=(),
        bodies=(
            form(
                400, captured("xai-http-400-incorrect-api-key-beeai-framework-issue447.json"), AUTH
            ),
        ),
    ),
    # https://inference-docs.cerebras.ai/support/error: statuses only (400, 401, 402, 403, 404,
    # 422, 429, 500, 503), no body shape. In-stream: none documented.
    "cerebras": Forms(
        stream=(),
        bodies=statuses(
            {
                400: UNKNOWN,
                401: AUTH,
                402: BUDGET,
                403: AUTH,
                404: UNKNOWN,
                422: UNKNOWN,
                429: RATE,
                500: UNAVAILABLE,
                503: UNAVAILABLE,
            }
        ),
    ),
    # https://openrouter.ai/docs/api-reference/errors-and-debugging: `{"error": {code, message,
    # metadata}}` with the status as `code` (400, 401, 402, 408, 429, 502, 503), and mid-stream an
    # `error` beside a choice with finish_reason `error` (captures from the same page).
    "openrouter": Forms(
        stream=(
            form(
                None,
                captured("openrouter-midstream-error-string-code-finish-error-openrouter-docs.sse"),
                UNAVAILABLE,
            ),
            form(
                None,
                captured("openrouter-midstream-error-429-typed-finish-error-openrouter-docs.sse"),
                RATE,
            ),
        ),
        bodies=(
            form(400, {"error": {"code": 400, "message": "Invalid model"}}, UNKNOWN),
            form(401, {"error": {"code": 401, "message": "No auth credentials found"}}, AUTH),
            form(
                402, captured("openrouter-http-402-fewer-max-tokens-doka-site-issue7.json"), BUDGET
            ),
            form(408, {"error": {"code": 408, "message": "Request timed out"}}, UNAVAILABLE),
            form(
                429,
                captured("openrouter-http-429-provider-returned-error-recorded-pydantic-ai.json"),
                RATE,
            ),
            form(502, {"error": {"code": 502, "message": "Provider returned error"}}, UNAVAILABLE),
            form(503, {"error": {"code": 503, "message": "No available providers"}}, UNAVAILABLE),
        ),
    ),
    # https://learn.microsoft.com/azure/ai-foundry/openai/reference: OpenAI's error object, a
    # content filter's with `innererror` (captures). In-stream: none documented; a filtered
    # completion ends with finish_reason `content_filter`.
    "azure": Forms(
        stream=(),
        bodies=(
            form(
                400,
                captured(
                    "azure-http-400-content-filter-jailbreak-innererror-tinytroupe-issue85.json"
                ),
                UNKNOWN,
            ),
            form(
                429,
                captured(
                    "azure-http-429-no-retry-after-reset-tokens-header-openai-python-issue937.partial.json"
                ),
                RATE,
            ),
        ),
    ),
    # https://ai.google.dev/gemini-api/docs/openai: Gemini's error object, in a one-element array
    # (capture under gemini/). In-stream: none documented for the compatibility endpoint.
    "gemini": Forms(
        stream=(),
        bodies=(
            form(
                400,
                [
                    {
                        "error": {
                            "code": 400,
                            "message": "API key not valid.",
                            "status": "INVALID_ARGUMENT",
                            "details": [
                                {
                                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                    "reason": "API_KEY_INVALID",
                                }
                            ],
                        }
                    }
                ],
                AUTH,
            ),
            form(
                429,
                [
                    {
                        "error": {
                            "code": 429,
                            "message": "Resource exhausted",
                            "status": "RESOURCE_EXHAUSTED",
                        }
                    }
                ],
                RATE,
            ),
        ),
    ),
    # huggingface/text-generation-inference @ db931fcf: router/src/server.rs streams
    # `InferError::into_openai_event` on the Messages API (`{"error": {message,
    # http_status_code: 422}}`) and `{"error", "error_type"}` on /generate_stream (capture);
    # bodies by error_type: tests/unit/test_compat_error_kinds.py.
    "tgi": Forms(
        stream=(
            form(
                None,
                {"error": {"message": "Tool error: no tool named x", "http_status_code": 422}},
                UNKNOWN,
            ),
            form(
                None,
                captured("tgi-stream-error-validation-context-opea-genaiinfra-issue487.jsonl"),
                OVERFLOW,
            ),
            form(
                None,
                {"error": "Request failed during generation: CUDA OOM", "error_type": "generation"},
                UNAVAILABLE,
            ),
        ),
        bodies=(
            form(429, {"error": "Model is overloaded", "error_type": "overloaded"}, UNAVAILABLE),
        ),
    ),
}


def cases(kind: str) -> list[tuple[str, int]]:
    return [(n, i) for n, forms in sorted(FORMS.items()) for i in range(len(getattr(forms, kind)))]


def typed(error: StreamError) -> tuple[str, bool]:
    payload = classify(error, provider=None, model=None, attempt=1)
    return payload.type, payload.retryable


def test_every_compatible_provider_has_its_error_forms_listed() -> None:
    assert set(FORMS) == set(DIALECTS)


@pytest.mark.parametrize(("name", "index"), cases("stream"))
def test_an_in_stream_error_object_ends_the_attempt_with_its_type(name: str, index: int) -> None:
    found = FORMS[name].stream[index]
    chunk = {"choices": [{"index": 0, "delta": {"content": "Par"}, "finish_reason": None}]}
    events = run_payloads(f"openai-chat:{name}", [chunk, found.body])
    (error,) = [e for e in events if isinstance(e, StreamError)]
    assert typed(error) == (found.type, found.retryable)


@pytest.mark.parametrize(("name", "index"), cases("bodies"))
def test_a_documented_error_body_is_classified_as_documented(name: str, index: int) -> None:
    found = FORMS[name].bodies[index]
    error = StreamError(session_id="s", turn_id="t", seq=1, status=found.status, body=found.body)
    assert typed(error) == (found.type, found.retryable)
