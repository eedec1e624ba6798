"""Anthropic Messages adapter (and Bedrock InvokeModel payloads) against recorded streams."""

from __future__ import annotations

import pytest
from test_adapters_support import (
    CTX,
    FIXTURES,
    Expect,
    assert_outcome,
    payloads_of,
    run_fixture,
    run_payloads,
    run_sse,
    usage,
)

from terminus.events.adapters import make_adapter
from terminus.events.adapters.anthropic import SPLICED_MESSAGE
from terminus.events.inbound import (
    FinishStep,
    ProviderTerminal,
    ReasoningEnd,
    StreamClosed,
    StreamError,
    TextStart,
    ToolInputDelta,
    ToolInputStart,
    ToolResult,
    Usage,
)

PARIS = ("toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather", {"location": "Paris"})
FLORENCE = ("toolu_01N2eM4V43kGCDkq2Lw7ChWQ", "weather", {"location": "Florence,Italy"})
THINKING = ("toolu_01Js4AMfx5qpTLhwTusnvT68", "weather", {"location": "Florence, Italy"})
SEARCH = (
    "srvtoolu_01KYmV1c6SjLeWGNcNG4p2yi",
    "web_search",
    {"query": "Tokyo population 2026 current"},
)
STOP = "message_stop"

CASES: dict[str, Expect] = {
    "anthropic/text-basic-ping-sdk-python.sse": Expect(
        text="Hello there!", finish="stop", usage=usage(11, 6), terminal=None
    ),
    "anthropic/tool-use-input-json-delta-sdk-python.sse": Expect(
        text="weather in Paris",
        tools=(PARIS,),
        finish="tool-calls",
        usage=usage(377, 65),
        terminal=None,
    ),
    "anthropic/max-tokens-mid-tool-input-sdk-python.sse": Expect(
        text="taxes.txt", finish="length", usage=usage(450, 124), terminal=None
    ),
    "anthropic/refusal-stop-details-sdk-python.sse": Expect(
        finish="content-filter", usage=usage(20, 0), terminal=None
    ),
    "anthropic/error-event-overloaded-sdk-python.sse": Expect(error="Overloaded"),
    "anthropic/error-event-overloaded-sdk-ts.sse": Expect(error="Overloaded"),
    "anthropic/text-recorded-fantasy.sse": Expect(
        text='Olá! (That\'s "hi" in Portuguese)',
        finish="stop",
        usage=usage(16, 38),
        terminal=STOP,
    ),
    "anthropic/tool-use-recorded-fantasy.sse": Expect(
        text="Florence, Italy for you.",
        tools=(FLORENCE,),
        finish="tool-calls",
        usage=usage(394, 67),
        terminal=STOP,
    ),
    "anthropic/thinking-tool-use-recorded-fantasy.sse": Expect(
        reasoning="make the function call.",
        tools=(THINKING,),
        finish="tool-calls",
        usage=usage(424, 119),
        terminal=STOP,
    ),
    "anthropic/web-search-server-tool-citations-recorded-fantasy.sse": Expect(
        text="36,953,600", tools=(SEARCH,), finish="stop", usage=usage(13520, 415), terminal=STOP
    ),
    "anthropic/text-after-429-retries-recorded-sdk-python.sse": Expect(
        text="[12345,67890]", finish="stop", usage=usage(135, 10), terminal=STOP
    ),
    "anthropic/spliced-message-start-synthetic-vercel-ai.jsonl": Expect(
        reasoning="I will call the tool.", error=SPLICED_MESSAGE
    ),
    "anthropic/truncated-mid-tool-input-tail-litellm-pr32159.partial.sse": Expect(),
    "anthropic/error-event-data-overloaded-details-null-vertex-sdk-ts-issue346.json": Expect(
        error="Overloaded"
    ),
    "anthropic/error-event-data-overloaded-request-id-gptel-pr1512.json": Expect(
        error="Overloaded"
    ),
    "bedrock/anthropic-invoke-with-response-stream-recorded-fantasy.decoded.jsonl": Expect(
        text="How can I help you today?", finish="stop", usage=usage(16, 18), terminal=STOP
    ),
    "bedrock/anthropic-invoke-with-response-stream-recorded-fantasy.eventstream": Expect(
        text="How can I help you today?", finish="stop", usage=usage(16, 18), terminal=STOP
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture_outcome(name: str) -> None:
    assert_outcome(run_fixture(name), CASES[name])


# These SDK fixtures end right after `message_stop`'s data line, without the blank line that
# dispatches it: by the WHATWG rule that event is lost at EOF, as it is in the SDKs' decoders.
UNTERMINATED = sorted(
    name
    for name, expect in CASES.items()
    if name.endswith("-sdk-python.sse") and expect.finish and expect.terminal is None
)


def test_the_unterminated_fixtures_are_the_four_known() -> None:
    assert len(UNTERMINATED) == 4


@pytest.mark.parametrize("name", UNTERMINATED)
def test_unterminated_last_event_is_dropped_and_its_blank_line_restores_it(name: str) -> None:
    text = (FIXTURES / name).read_text()
    assert not text.endswith("\n\n")
    events = run_sse("anthropic", text.rstrip("\n") + "\n\n")
    assert [e.kind for e in events if isinstance(e, ProviderTerminal)] == [STOP]


def test_spliced_generations_report_one_error_and_nothing_after() -> None:
    adapter = make_adapter("anthropic", CTX)
    payloads = payloads_of(FIXTURES / "anthropic/spliced-message-start-synthetic-vercel-ai.jsonl")
    events = [e for p in payloads for e in adapter.feed_payload(p)]
    errors = [e for e in events if isinstance(e, StreamError)]
    assert [(e.status, e.body, e.message) for e in errors] == [(None, None, SPLICED_MESSAGE)]
    assert events[-1] is errors[0]
    assert adapter.close() == []


def test_thinking_signature_lands_on_reasoning_end() -> None:
    events = run_fixture("anthropic/thinking-tool-use-recorded-fantasy.sse")
    (end,) = [e for e in events if isinstance(e, ReasoningEnd)]
    assert (end.signature or "").startswith("EtYDCkYICxgCKkAV")


def test_empty_json_fragments_are_not_deltas() -> None:
    events = run_fixture("anthropic/tool-use-input-json-delta-sdk-python.sse")
    deltas = [e.delta for e in events if isinstance(e, ToolInputDelta)]
    assert deltas == ['{"locati', 'on": "P', "ar", 'is"}']


def test_open_tool_block_is_left_open_at_max_tokens() -> None:
    events = run_fixture("anthropic/max-tokens-mid-tool-input-sdk-python.sse")
    assert [e.tool_call_id for e in events if isinstance(e, ToolInputStart)] == [
        "toolu_01EKqbqmZrGRXy18eN7m9kvY"
    ]


def test_server_tool_result_is_compact_json() -> None:
    events = run_fixture("anthropic/web-search-server-tool-citations-recorded-fantasy.sse")
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.tool_call_id == SEARCH[0]
    assert result.output.startswith('[{"type":"web_search_result","title":"Tokyo Population 2026"')


def test_part_ids_carry_step_and_attempt() -> None:
    events = run_fixture("anthropic/text-basic-ping-sdk-python.sse")
    assert [e.part_id for e in events if isinstance(e, TextStart)] == ["p2.3.0"]
    assert {(e.session_id, e.turn_id, e.step, e.attempt, e.ts_ms) for e in events} == {
        ("s1", "t1", 2, 3, 7)
    }


def test_message_delta_usage_overrides_message_start() -> None:
    start = {"type": "message_start", "message": {"usage": {"input_tokens": 5}}}
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": "pause_turn"},
        "usage": {"input_tokens": 9, "output_tokens": 2, "cache_creation_input_tokens": 4},
    }
    finish, closed = run_payloads("anthropic", [start, delta])
    assert isinstance(finish, FinishStep)
    assert isinstance(closed, StreamClosed)
    assert (finish.finish_reason, finish.raw_finish_reason) == ("other", "pause_turn")
    assert finish.usage == Usage(input_tokens=9, output_tokens=2, cache_write_tokens=4)


def test_deltas_of_unstarted_blocks_and_unknown_events_are_ignored() -> None:
    text = (
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":3,'
        '"delta":{"type":"text_delta","text":"x"}}\n\n'
        'event: mystery\ndata: {"type":"mystery"}\n\n'
    )
    assert [type(e) for e in run_sse("anthropic", text)] == [StreamClosed]


def test_tool_input_that_does_not_parse_emits_no_tool_call() -> None:
    block = {"type": "tool_use", "id": "toolu_x", "name": "f", "input": {}}
    payloads = [
        {"type": "message_start", "message": {}},
        {"type": "content_block_start", "index": 0, "content_block": block},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"a":'},
        },
        {"type": "content_block_stop", "index": 0},
    ]
    events = run_payloads("anthropic", payloads)
    assert [type(e) for e in events] == [ToolInputStart, ToolInputDelta, StreamClosed]
