"""Ollama's and vLLM's context overflows, in their own words, are `context_overflow` with the
reason `context_size_exceeded`, and the turn asks for compaction (statemachines/error_bodies.py,
the `ollama` and `vllm` rules). Neither server types the condition: Ollama sends a 400
`invalid_request_error`, vLLM a 400 `BadRequestError`, so without its rule each message reads as a
malformed request (Ollama's, "the prompt is longer than the context length", and vLLM's decoder
check) or loses its reason (vLLM's "maximum context length is N tokens", which the generic
message pattern of statemachines/classify.py also matches).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pytest
from test_adapters_support import run_payloads

from terminus.events.inbound import StreamError
from terminus.service.cli.simulate import simulate
from terminus.statemachines.classify import classify

# ollama/ollama @ fb307609: llm/llama_server.go `completionPromptForRequest` (context shift off,
# api.StatusError 400) and server/routes.go (embeddings with `truncate: false`, 400). The native
# API answers `{"error": <message>}` (api.StatusError's json tag); the OpenAI-compatible layer
# re-wraps it with openai/openai.go `NewError` (400 -> `invalid_request_error`, `code` null),
# middleware/openai.go `writeError`.
OLLAMA_PROMPT: Final = (
    "the prompt is longer than the context length currently available to the model; shorten the"
    " prompt, adjust the context length in settings, or use a model with a longer context length"
)
OLLAMA_INPUT: Final = "the input length exceeds the context length"

# vLLM: the serving layer's check (vllm/entrypoints/openai serving `_validate_input`, a 400
# `BadRequestError` through `create_error_response`), as a client recorded it from a vLLM server
# (openai.BadRequestError in a public log); and the engine's own check (vllm/v1/engine/
# processor.py `_validate_model_input`, a ValueError the server answers as a 400
# `BadRequestError`; tests/v1/e2e/test_context_length.py expects it).
VLLM_SERVING: Final = (
    "This model's maximum context length is 40960 tokens. However, you requested 0 output tokens"
    " and your prompt contains at least 40961 input tokens, for a total of at least 40961 tokens."
    " Please reduce the length of the input prompt or the number of requested output tokens."
    " (parameter=input_tokens, value=40961)"
)
VLLM_DECODER: Final = (
    "The decoder prompt (length 8825) is longer than the maximum model length of 8192. Make sure"
    " that `max_model_len` is no smaller than the number of text tokens."
)


def openai_error(message: str, kind: str, code: Any = None, param: Any = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


# name -> (provider, status, body): every form each server documents for the condition.
BODIES: Final[dict[str, tuple[str, int, Any]]] = {
    "ollama-openai-prompt": ("ollama", 400, openai_error(OLLAMA_PROMPT, "invalid_request_error")),
    "ollama-openai-input": ("ollama", 400, openai_error(OLLAMA_INPUT, "invalid_request_error")),
    "ollama-native-prompt": ("ollama", 400, {"error": OLLAMA_PROMPT}),
    "ollama-native-input": ("ollama", 400, {"error": OLLAMA_INPUT}),
    "vllm-serving": (
        "vllm",
        400,
        openai_error(VLLM_SERVING, "BadRequestError", 400, "input_tokens"),
    ),
    "vllm-decoder": ("vllm", 400, openai_error(VLLM_DECODER, "BadRequestError", 400)),
    # Before vLLM 0.10 the same error object came flat, with no `error` wrapper (vllm issue 20409).
    "vllm-decoder-flat": (
        "vllm",
        400,
        {"object": "error", "message": VLLM_DECODER, "type": "BadRequestError", "code": 400},
    ),
}
OVERFLOW: Final = ("context_overflow", False, "context_size_exceeded")


def classified(status: int | None, body: Any) -> tuple[str, bool, str | None]:
    error = StreamError(session_id="s", turn_id="t", seq=1, status=status, body=body)
    payload = classify(error, provider=None, model=None, attempt=1)
    return payload.type, payload.retryable, payload.reason


@pytest.mark.parametrize("name", sorted(BODIES))
def test_a_local_servers_overflow_body_is_a_context_overflow_with_its_reason(name: str) -> None:
    _, status, body = BODIES[name]
    assert classified(status, body) == OVERFLOW


@pytest.mark.parametrize("name", sorted(BODIES))
def test_the_turn_asks_for_compaction_not_a_retry(name: str, tmp_path: Path) -> None:
    provider, status, body = BODIES[name]
    capture = tmp_path / f"{name}.json"
    capture.write_text(json.dumps({"status_code": status, "headers": {}, "body": body}))
    outcome = simulate([capture], provider=f"openai-chat:{provider}")
    assert (outcome.state, outcome.attempts[-1].outcome) == ("retrying", "compaction")
    assert outcome.attempts[-1].error is not None
    assert outcome.attempts[-1].error.reason == "context_size_exceeded"


def test_vllms_overflow_mid_stream_is_the_attempts_error_and_asks_for_compaction() -> None:
    """vLLM's streaming error (serving `create_streaming_error_response`): the error object
    under `error`, after the 200 and whatever the stream carried before it."""
    chunk = {"choices": [{"index": 0, "delta": {"content": "Par"}, "finish_reason": None}]}
    error = openai_error(VLLM_DECODER, "BadRequestError", 400)
    (failed,) = [
        e for e in run_payloads("openai-chat:vllm", [chunk, error]) if isinstance(e, StreamError)
    ]
    assert classified(failed.status, failed.body) == OVERFLOW
