"""Issue 14, item by item: the stream shapes the first wave got wrong, each through `simulate`.

Inputs are real fixtures cut or re-framed as the named rule says, or the minimal payload the
provider's own type definitions describe where no capture shows the shape.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from terminus.events.adapters import make_adapter
from terminus.events.adapters.base import AttemptContext
from terminus.events.inbound import StreamClosed, StreamError
from terminus.events.outbound import AgentError, TextPart, TurnFinished
from terminus.service.cli.simulate import Outcome, simulate
from terminus.statemachines.classify import classify

FIXTURES = Path(__file__).parent.parent / "fixtures" / "provider-streams"
ANTHROPIC_TEXT = FIXTURES / "anthropic/text-recorded-fantasy.sse"
CHAT_TOOLS = FIXTURES / "openai-chat/tool-calls-usage-done-recorded-fantasy.sse"
GEMINI_TEXT = FIXTURES / "gemini/multi-chunk-text-recorded-fantasy.sse"
BEDROCK = FIXTURES / "bedrock/anthropic-invoke-with-response-stream-recorded-fantasy.eventstream"
CTX = AttemptContext(session_id="s", turn_id="t")
TOO_MANY_TOKENS = "Too many tokens, please wait before trying again."


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def last(outcome: Outcome) -> tuple[str, str, str | None]:
    attempt = outcome.attempts[-1]
    why = attempt.error.type if attempt.error else attempt.reason or attempt.finish_reason
    return outcome.state, attempt.outcome, why


def text_of(outcome: Outcome) -> str:
    assert outcome.message is not None
    return "".join(p.text for p in outcome.message.parts if isinstance(p, TextPart))


def sse(*payloads: Any) -> str:
    return "".join(f"data: {msgspec.json.encode(p).decode()}\n\n" for p in payloads)


# --- 1. cuts on every wire --------------------------------------------------------------------


def test_1_sse_cut_mid_line_is_truncated_not_an_error(tmp_path: Path) -> None:
    raw = ANTHROPIC_TEXT.read_bytes()
    cut = write(tmp_path, "cut.sse", raw[: raw.index(b'"message_delta"') + 5])
    assert last(simulate([cut], provider="anthropic")) == (
        "retrying",
        "truncated",
        "missing_terminal",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "terminus", "simulate", "--provider", "anthropic", str(cut)],
        capture_output=True,
        check=False,
    )
    assert (proc.returncode, proc.stderr) == (0, b"")


def test_1_sse_cut_then_retried_keeps_only_the_whole_attempt(tmp_path: Path) -> None:
    raw = ANTHROPIC_TEXT.read_bytes()
    cut = write(tmp_path, "cut.sse", raw[: len(raw) // 2])
    outcome = simulate([cut, ANTHROPIC_TEXT], provider="anthropic")
    assert outcome.state == "finished"
    assert [a.outcome for a in outcome.attempts] == ["truncated", "finished"]
    assert text_of(outcome).startswith("Olá!")


def test_1_eventstream_cut_mid_frame_is_truncated(tmp_path: Path) -> None:
    raw = BEDROCK.read_bytes()
    cut = write(tmp_path, "cut.eventstream", raw[: len(raw) - 10])
    assert last(simulate([cut], provider="bedrock")) == (
        "retrying",
        "truncated",
        "missing_terminal",
    )


def gemini_array(path: Path) -> bytes:
    """The same chunks as Gemini's non-SSE body sends them: one JSON array (derived framing)."""
    payloads = [line[len("data: ") :] for line in path.read_text().splitlines() if line]
    return ("[" + ",\r\n".join(payloads) + "]").encode()


def test_1_gemini_json_array_whole_finishes_and_cut_mid_array_is_truncated(
    tmp_path: Path,
) -> None:
    body = gemini_array(GEMINI_TEXT)
    whole = simulate([write(tmp_path, "whole.sse", body)], provider="gemini")
    assert (whole.state, text_of(whole)) == (
        "finished",
        text_of(simulate([GEMINI_TEXT], provider="gemini")),
    )
    cut_at = body.rindex(b'"finishReason"')
    cut = write(tmp_path, "cut.json", body[:cut_at])
    assert last(simulate([cut], provider="gemini")) == ("retrying", "truncated", "missing_terminal")


def test_1_malformed_bytes_inside_a_complete_event_are_a_retryable_in_band_error(
    tmp_path: Path,
) -> None:
    text = ANTHROPIC_TEXT.read_text().replace('"text_delta"', '"text_delta" oops', 1)
    outcome = simulate([write(tmp_path, "bad.sse", text)], provider="anthropic")
    assert last(outcome) == ("retrying", "failed", "provider_unavailable")
    error = outcome.attempts[-1].error
    assert error is not None
    assert error.retryable
    assert "data is not JSON" in error.message


def test_1_invalid_utf8_is_an_in_band_error_and_a_split_character_is_not(tmp_path: Path) -> None:
    raw = ANTHROPIC_TEXT.read_bytes()
    accent = raw.index("á".encode())
    adapter = make_adapter("anthropic", CTX)
    events = adapter.feed_bytes(raw[: accent + 1]) + adapter.feed_bytes(raw[accent + 1 :])
    events += adapter.close()
    assert isinstance(events[-1], StreamClosed)
    broken = raw[:accent] + b"\xff" + raw[accent + 2 :]
    outcome = simulate([write(tmp_path, "bad.sse", broken)], provider="anthropic")
    assert last(outcome) == ("retrying", "failed", "provider_unavailable")


STREAMS = sorted(p for p in FIXTURES.rglob("*") if p.suffix in (".sse", ".eventstream"))


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_1_every_prefix_of_every_stream_closes_without_raising(data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(STREAMS))
    raw = path.read_bytes()
    cut = data.draw(st.integers(0, len(raw)))
    chunk = data.draw(st.integers(1, 64))
    provider = {"bedrock": "bedrock", "gemini": "gemini", "openai-responses": "openai-responses"}
    adapter = make_adapter(
        provider.get(path.parent.name, path.parent.name.replace("-compatible", "-chat")), CTX
    )
    events = [
        e for i in range(0, cut, chunk) for e in adapter.feed_bytes(raw[i : min(i + chunk, cut)])
    ]
    events += adapter.close()
    assert isinstance(events[-1], StreamClosed | StreamError)
    assert [e.seq for e in events] == list(range(2, 2 + len(events)))


# --- 2. Gemini prompt blocks ------------------------------------------------------------------


def test_2_gemini_prompt_block_is_a_refusal_on_attempt_one(tmp_path: Path) -> None:
    blocked = {"blockReason": "PROHIBITED_CONTENT"}
    usage = {"promptTokenCount": 8, "totalTokenCount": 8}
    body = sse({"promptFeedback": blocked, "usageMetadata": usage})
    outcome = simulate([write(tmp_path, "blocked.sse", body)], provider="gemini")
    assert last(outcome) == ("finished", "finished", "content-filter")
    assert len(outcome.attempts) == 1
    finished = [u for u in outcome.updates if isinstance(u, TurnFinished)]
    assert [f.stopReason for f in finished] == ["refusal"]
    assert not [u for u in outcome.updates if isinstance(u, AgentError)]


# --- 3. Chat tool calls that end with "stop" --------------------------------------------------


def test_3_chat_tool_calls_with_finish_stop_are_a_tool_calls_step(tmp_path: Path) -> None:
    text = CHAT_TOOLS.read_text().replace('"finish_reason":"tool_calls"', '"finish_reason":"stop"')
    assert '"finish_reason":"stop"' in text
    outcome = simulate([write(tmp_path, "stop.sse", text)], provider="openai-chat")
    assert last(outcome) == ("awaiting_step", "finished", "tool-calls")


# --- 4. finish_reason "error" -----------------------------------------------------------------


def test_4_chat_finish_reason_error_is_an_in_band_error_never_a_proof(tmp_path: Path) -> None:
    cut = {"index": 0, "delta": {"content": "half an ans"}, "finish_reason": None}
    in_band = {"code": 502, "message": "Provider disconnected"}
    failed = {"index": 0, "delta": {}, "finish_reason": "error", "error": in_band}
    body = sse({"choices": [cut]}, {"choices": [failed]}) + "data: [DONE]\n\n"
    outcome = simulate([write(tmp_path, "err.sse", body)], provider="openai-chat")
    assert last(outcome) == ("retrying", "failed", "provider_unavailable")
    error = outcome.attempts[-1].error
    assert error is not None
    assert error.message == "Provider disconnected"
    assert outcome.message is None


def test_4_normalized_finish_error_fails_with_agent_error_and_no_turn_finished(
    tmp_path: Path,
) -> None:
    lines = [
        {"type": "text-start", "part_id": "a"},
        {"type": "text-delta", "part_id": "a", "delta": "cut"},
        {"type": "finish-step", "finish_reason": "error", "raw_finish_reason": "error"},
    ]
    path = write(
        tmp_path, "err.jsonl", "".join(msgspec.json.encode(x).decode() + "\n" for x in lines)
    )
    outcome = simulate([path], max_attempts=1)
    assert outcome.state == "failed"
    assert outcome.message is None
    kinds = [u.__struct_config__.tag for u in outcome.updates]
    assert "turn_finished" not in kinds
    assert kinds[-1] == "agent_error"


# --- 5. Bedrock exceptions, in a stream and over HTTP -------------------------------------------


@pytest.mark.parametrize(
    ("exception", "status", "message", "expected"),
    [
        ("throttlingException", 429, TOO_MANY_TOKENS, "rate_limit"),
        ("validationException", 400, "Input is too long for requested model.", "context_overflow"),
        ("validationException", 400, "Malformed input request.", "unknown"),
        ("serviceUnavailableException", 503, "Service unavailable.", "provider_unavailable"),
        ("internalServerException", 500, "Internal error.", "provider_unavailable"),
        ("modelStreamErrorException", 424, "Model stream error.", "provider_unavailable"),
        ("modelTimeoutException", 408, "Model timed out.", "provider_unavailable"),
    ],
)
def test_5_bedrock_stream_exceptions_classify_as_the_same_http_error(
    exception: str, status: int, message: str, expected: str
) -> None:
    adapter = make_adapter("bedrock-converse", CTX)
    (error,) = adapter.feed_payload({exception: {"message": message}})
    assert isinstance(error, StreamError)
    in_stream = classify(error, provider="bedrock", model=None, attempt=1)
    name = exception[0].upper() + exception[1:]
    headers = {"x-amzn-errortype": f"{name}:http://internal.amazon.com/coral/"}
    http = StreamError(
        session_id="s",
        turn_id="t",
        seq=2,
        status=status,
        body={"message": message},
        headers=headers,
    )
    over_http = classify(http, provider="bedrock", model=None, attempt=1)
    assert in_stream.type == over_http.type == expected
    assert in_stream.retryable == over_http.retryable
    assert in_stream.message == message


# --- 6. code over type ------------------------------------------------------------------------


def test_6_transient_code_decides_over_a_generic_type(tmp_path: Path) -> None:
    # The OpenAI-style in-band error object, as a gateway wraps it in a Chat-style frame.
    error = {
        "code": "request_timeout",
        "type": "invalid_request_error",
        "message": "stream closed before response.completed",
    }
    body = sse(
        {"type": "response.created", "response": {"id": "r", "status": "in_progress"}},
        {"error": error},
    )
    outcome = simulate([write(tmp_path, "timeout.sse", body)], provider="openai-responses")
    assert last(outcome) == ("retrying", "failed", "provider_unavailable")


# --- 7. empty OTHER finishes ------------------------------------------------------------------


def test_7_an_empty_other_finish_is_truncated_and_retried(tmp_path: Path) -> None:
    other = {"finishReason": "OTHER", "index": 0}
    usage = {"promptTokenCount": 12, "totalTokenCount": 12}
    body = sse({"candidates": [other], "usageMetadata": usage})
    outcome = simulate([write(tmp_path, "other.sse", body)] * 3, provider="gemini")
    assert [a.reason for a in outcome.attempts] == ["empty_other"] * 3
    assert outcome.state == "failed"
    assert outcome.message is None


# --- 8. error frames of another dialect ---------------------------------------------------------


def test_8_a_chat_style_error_frame_inside_a_responses_stream_is_an_in_band_error(
    tmp_path: Path,
) -> None:
    body = sse(
        {"type": "response.created", "response": {"id": "r", "status": "in_progress"}},
        {"error": {"message": "upstream connect error", "type": "server_error"}},
    )
    outcome = simulate([write(tmp_path, "gw.sse", body)], provider="openai-responses")
    assert last(outcome) == ("retrying", "failed", "provider_unavailable")
    assert outcome.attempts[-1].error is not None
    assert outcome.attempts[-1].error.message == "upstream connect error"


@pytest.mark.parametrize("indent", [0, 2])
def test_8_an_unframed_json_error_body_after_the_last_event_is_an_in_band_error(
    tmp_path: Path, indent: int
) -> None:
    error = {"error": {"type": "rate_limit_error", "message": "Number of requests exceeded"}}
    tail = msgspec.json.format(msgspec.json.encode(error), indent=indent).decode()
    text = ANTHROPIC_TEXT.read_text().split("event: content_block_stop")[0] + tail
    outcome = simulate([write(tmp_path, "gw.sse", text)], provider="anthropic")
    assert last(outcome) == ("retrying", "failed", "rate_limit")
    assert outcome.attempts[-1].error is not None
    assert outcome.attempts[-1].error.message == "Number of requests exceeded"


# --- 9. simulate on multi-step logs -----------------------------------------------------------


def jsonl(*docs: dict[str, Any]) -> str:
    return "".join(msgspec.json.encode(d).decode() + "\n" for d in docs)


def test_9_a_log_with_its_own_identity_is_folded_as_given(tmp_path: Path) -> None:
    call = {"tool_call_id": "c1", "tool_name": "weather"}
    first, second = {"step": 1, "attempt": 1}, {"step": 2, "attempt": 1}
    tool_use = {"finish_reason": "tool-calls", "raw_finish_reason": "tool_use"}
    end_turn = {"finish_reason": "stop", "raw_finish_reason": "end_turn"}
    log = jsonl(
        {"type": "turn-started", "seq": 0, "max_attempts": 2},
        {"type": "attempt-started", **first, "seq": 1},
        {"type": "tool-call", **first, "seq": 2, **call, "input": {"q": "x"}},
        {"type": "finish-step", **first, "seq": 3, **tool_use, "usage": {"output_tokens": 5}},
        {"type": "tool-result", **first, "seq": 4, "tool_call_id": "c1", "output": "sunny"},
        {"type": "attempt-started", **second, "seq": 0},
        {"type": "text-delta", **second, "seq": 1, "part_id": "t", "delta": "Sunny."},
        {"type": "finish-step", **second, "seq": 2, **end_turn, "usage": {"output_tokens": 2}},
    )
    outcome = simulate([write(tmp_path, "log.jsonl", log)])
    assert outcome.state == "finished"
    assert [(a.step, a.attempt, a.finish_reason) for a in outcome.attempts] == [
        (1, 1, "tool-calls"),
        (2, 1, "stop"),
    ]
    assert text_of(outcome) == "Sunny."


def test_9_a_tool_results_file_between_two_attempt_files(tmp_path: Path) -> None:
    call_id = "call_qLFv8oQOs68qRuEVmG8TuEJp"
    result = {"type": "tool-result", "tool_call_id": call_id, "output": "20C"}
    results = write(tmp_path, "results.jsonl", jsonl(result))
    answer = FIXTURES / "openai-chat/text-stop-usage-done-recorded-fantasy.sse"
    outcome = simulate([CHAT_TOOLS, results], provider="openai-chat")
    assert outcome.state == "awaiting_step"
    outcome = simulate([CHAT_TOOLS, results, answer], provider="openai-chat")
    assert outcome.state == "finished", outcome.attempts
    assert outcome.message is not None
    tools = [p for p in outcome.message.parts if p.__struct_config__.tag == "tool"]
    assert [(t.state, t.output) for t in tools] == [("completed", "20C")]  # type: ignore[union-attr]
