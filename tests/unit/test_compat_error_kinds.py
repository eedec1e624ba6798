"""Every error type llama.cpp's server, vLLM, TGI and Groq document has a row in its own table
(statemachines/error_kinds.py), and each row classifies the error as its document says.

The lists below are copied from the sources named beside them, independently of the tables. A
value present in another provider's table is no row of this one: the test reads each provider's
own table, so a deleted row fails here even where the merged lookup still knows the key.
"""

from __future__ import annotations

from typing import Final, NamedTuple

import pytest

from terminus.events.errors import ErrorType
from terminus.events.inbound import StreamError
from terminus.statemachines import error_kinds
from terminus.statemachines.classify import classify


class Documented(NamedTuple):
    """A provider's error types with the HTTP status it sends each with, and our error type."""

    source: str
    table: dict[str, ErrorType]
    types: dict[str, tuple[int, ErrorType]]


DOCUMENTED: Final[dict[str, Documented]] = {
    # ggml-org/llama.cpp tools/server/server-common.cpp `format_error_response`: every
    # `error_type` enum value, its `type` string and the status it is sent with.
    "llama-cpp": Documented(
        "ggml-org/llama.cpp tools/server/server-common.cpp format_error_response",
        error_kinds.LLAMA_CPP_ERROR_TYPES,
        {
            "invalid_request_error": (400, "unknown"),
            "authentication_error": (401, "auth"),
            "not_found_error": (404, "unknown"),
            "server_error": (500, "provider_unavailable"),
            "permission_error": (403, "auth"),
            "not_supported_error": (501, "unknown"),
            "unavailable_error": (503, "provider_unavailable"),
            "exceed_context_size_error": (400, "context_overflow"),
        },
    ),
    # vllm-project/vllm vllm/entrypoints/openai/serving_engine.py `create_error_response`: the
    # `err_type` its callers pass (BadRequestError by default, NotFoundError for an unknown model
    # or LoRA, NotImplementedError for an unsupported feature, InternalServerError for an engine
    # failure); `code` is the status.
    "vllm": Documented(
        "vllm-project/vllm vllm/entrypoints/openai/serving_engine.py create_error_response",
        error_kinds.VLLM_ERROR_TYPES,
        {
            "BadRequestError": (400, "unknown"),
            "NotFoundError": (404, "unknown"),
            "NotImplementedError": (501, "unknown"),
            "InternalServerError": (500, "provider_unavailable"),
        },
    ),
    # huggingface/text-generation-inference @ db931fcf router/src/infer/mod.rs
    # `InferError::error_type` and the status server.rs gives each (`From<InferError>`), plus
    # server.rs `health` (503 `healthcheck`). The other `error_type` strings of server.rs
    # ("suffix not supported", "batch size exceeded", "headers", "no details") belong to the
    # legacy /v1/completions route, which terminus does not read.
    "tgi": Documented(
        "huggingface/text-generation-inference router/src/infer/mod.rs, router/src/server.rs",
        error_kinds.TGI_ERROR_TYPES,
        {
            "generation": (424, "provider_unavailable"),
            "overloaded": (429, "provider_unavailable"),
            "validation": (422, "unknown"),
            "incomplete_generation": (500, "provider_unavailable"),
            "incomplete_generation_stream": (500, "provider_unavailable"),
            "template_error": (422, "unknown"),
            "missing_template_variable": (422, "unknown"),
            "tool_error": (422, "unknown"),
            "stream_serialization_error": (500, "provider_unavailable"),
            "healthcheck": (503, "provider_unavailable"),
        },
    ),
    # https://console.groq.com/docs/errors and the recorded bodies of SOURCES.md: the codes Groq
    # sends beside OpenAI's (498 `capacity_exceeded` is the flex tier's "try again later").
    "groq": Documented(
        "https://console.groq.com/docs/errors; recorded Groq bodies (SOURCES.md)",
        error_kinds.GROQ_ERROR_CODES,
        {
            "capacity_exceeded": (498, "provider_unavailable"),
            "json_validate_failed": (400, "unknown"),
            "tool_use_failed": (400, "unknown"),
            "model_not_found": (404, "unknown"),
        },
    ),
}
TGI_FIELDS: Final = ("error", "error_type")


def missing(name: str, table: dict[str, ErrorType]) -> set[str]:
    """The documented error types of `name` that `table` has no row for."""
    return set(DOCUMENTED[name].types) - set(table)


def body_of(name: str, kind: str) -> dict[str, object]:
    """The error body each server sends, in its own shape, for one error type."""
    status = DOCUMENTED[name].types[kind][0]
    if name == "tgi":
        return dict(zip(TGI_FIELDS, (f"{kind} failed", kind), strict=True))
    if name == "groq":
        return {
            "error": {"message": f"{kind} failed", "type": "invalid_request_error", "code": kind}
        }
    return {"error": {"code": status, "message": f"{kind} failed", "type": kind}}


def rows() -> list[tuple[str, str]]:
    return [(name, kind) for name, doc in sorted(DOCUMENTED.items()) for kind in sorted(doc.types)]


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_every_documented_error_type_has_a_row_in_its_providers_table(name: str) -> None:
    assert missing(name, DOCUMENTED[name].table) == set()


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_a_row_removed_from_the_table_is_reported(name: str) -> None:
    removed = sorted(DOCUMENTED[name].types)[0]
    trimmed = {k: v for k, v in DOCUMENTED[name].table.items() if k != removed}
    assert missing(name, trimmed) == {removed}


@pytest.mark.parametrize(("name", "kind"), rows())
def test_each_row_classifies_as_its_document_says(name: str, kind: str) -> None:
    _, expected = DOCUMENTED[name].types[kind]
    assert DOCUMENTED[name].table[kind] == expected


@pytest.mark.parametrize(("name", "kind"), rows())
def test_each_documented_body_is_classified_by_its_type(name: str, kind: str) -> None:
    status, expected = DOCUMENTED[name].types[kind]
    error = StreamError(session_id="s", turn_id="t", seq=1, status=status, body=body_of(name, kind))
    assert classify(error, provider=None, model=None, attempt=1).type == expected


@pytest.mark.parametrize(("name", "kind"), rows())
def test_the_same_type_mid_stream_is_classified_alike(name: str, kind: str) -> None:
    """In a 200 stream there is no status to fall back on: the type alone decides."""
    _, expected = DOCUMENTED[name].types[kind]
    error = StreamError(session_id="s", turn_id="t", seq=1, status=None, body=body_of(name, kind))
    assert classify(error, provider=None, model=None, attempt=1).type == expected
