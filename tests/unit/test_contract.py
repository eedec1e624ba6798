"""The published contract (docs/contract/) is what the code says: regenerated, it is byte for
byte the committed files; a field added to a frame without regenerating is caught; the OpenAPI
paths are the gateway's routes; recorded events and frames validate against the schemas."""

from __future__ import annotations

import functools
import json
import operator
from pathlib import Path
from typing import Any, get_args

import msgspec
import pytest
from jsonschema import Draft202012Validator
from starlette.routing import Mount, Route

from terminus.events.inbound import TextDelta
from terminus.events.outbound import AgentMessageChunk, SessionUpdate
from terminus.service.contract import documents, drift, write
from terminus.service.contract.documents import TYPES
from terminus.service.gateway.routes import create_gateway
from terminus.service.settings import Settings
from terminus.statemachines.fold import evolve
from terminus.statemachines.outputs import Outputs

CONTRACT = Path(__file__).parents[2] / "docs" / "contract"


def test_the_committed_contract_is_what_the_code_says() -> None:
    assert drift(CONTRACT) == [], "run `terminus contract` and commit docs/contract"


class WiderChunk(AgentMessageChunk, frozen=True, kw_only=True, tag="agent_message_chunk"):
    """A frame with a field the committed contract does not have."""

    tokens: int = 0


def test_a_field_added_to_a_frame_without_regenerating_is_drift(tmp_path: Path) -> None:
    write(tmp_path)
    assert drift(tmp_path) == []
    frames = [WiderChunk if t is AgentMessageChunk else t for t in get_args(SessionUpdate)]
    wider = {**TYPES, "frame": functools.reduce(operator.or_, frames)}
    assert drift(tmp_path, wider) == ["asyncapi.json", "frame.schema.json", "openapi.json"]


def gateway_routes() -> set[tuple[str, str]]:
    app = create_gateway(None, Settings(), b"k" * 32)  # type: ignore[arg-type]
    found = set()
    for route in app.routes:
        if isinstance(route, Route):
            methods = route.methods or {"GET"}
            found |= {(route.path, m.lower()) for m in methods if m != "HEAD"}
        elif isinstance(route, Mount):
            found.add((route.path + "/{path}", "get"))  # static files
    return found


def test_the_openapi_paths_are_the_gateways_routes() -> None:
    spec = json.loads(documents()["openapi.json"])
    documented = {(path, method) for path, ops in spec["paths"].items() for method in ops}
    static = {r for r in gateway_routes() if r[0].startswith("/inspect/static")}
    assert documented == gateway_routes() - static


def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(documents()[name]))


def fold_outputs(events: list[Any]) -> Outputs:
    out, turn = Outputs(), None
    for event in events:
        turn, _ = evolve(turn, event, out=out)
    return out


@pytest.mark.parametrize("name", sorted(documents()))
def test_every_document_is_valid_json_with_its_header(name: str) -> None:
    document = json.loads(documents()[name])
    if name.endswith(".schema.json"):
        Draft202012Validator.check_schema(document)
    else:
        assert document.get("asyncapi") == "3.0.0" or document.get("openapi") == "3.1.0"


def test_what_the_core_makes_validates_against_the_schemas() -> None:
    from factories import Script

    s = Script(contract="anthropic-messages")
    s.text("a", "Hel", "lo")
    s.tool_call("c1", q="x")
    s.tool_result("c1")
    s.prove("stop", "end_turn")
    out = fold_outputs(s.events)
    events, frames = validator("inbound-event.schema.json"), validator("frame.schema.json")
    for event in s.events:
        events.validate(json.loads(msgspec.json.encode(event)))
    for frame in out.frames:
        frames.validate(json.loads(msgspec.json.encode(frame)))
    for message in out.messages:
        validator("message.schema.json").validate(json.loads(msgspec.json.encode(message)))
    for command in out.commands:
        validator("command.schema.json").validate(json.loads(msgspec.json.encode(command)))
    assert out.frames
    assert out.messages
    assert out.commands


def test_the_schemas_refuse_what_the_decoder_refuses() -> None:
    bad = json.loads(
        msgspec.json.encode(TextDelta(session_id="s", turn_id="t", seq=1, part_id="p", delta="x"))
    )
    bad["seq"] = "one"
    assert not validator("inbound-event.schema.json").is_valid(bad)
