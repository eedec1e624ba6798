"""The published contract against what the service really does, on a real Redis with a real
worker: every route asked for every answer docs/contract/openapi.json lists, each answer
validated by openapi-core, and everything the workers wrote to Redis validated against the
messages of docs/contract/asyncapi.json. (tests/e2e/test_contract_check.py type-checks the same
answers against a generated client, and runs `terminus contract --check`.)

Issue 31, item 1: the components Turn, MessagesPage, CancelAccepted and Problem were references
to themselves (a RecursionError in any validator), the timeline's body was `{}`, statuses the
routes answer were missing, and `terminus contract --check` compared the documents only with
themselves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pytest
from contract_support import CONTRACT, UNDECODABLE, Read, load, read_channels, sse_data, validator
from golden.inbound import replay_dir, versions
from jsonschema import Draft202012Validator
from redis.asyncio import Redis
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from terminus.service.conformance.check import mismatches
from terminus.service.conformance.probes import Answer
from terminus.service.conformance.run import answers_on
from terminus.service.settings import Settings

PARTITIONS: Final = 4


def openapi() -> dict[str, Any]:
    document: dict[str, Any] = json.loads((CONTRACT / "openapi.json").read_bytes())
    return document


@pytest.fixture
async def answers(redis: Redis, prefix: str) -> list[Answer]:
    """The scene folded by a real worker under the test's prefix, and every probe's answer."""
    return await answers_on(redis, Settings(prefix=prefix, partitions=PARTITIONS, block_ms=100))


async def test_every_answer_of_every_route_is_the_one_the_document_lists(
    answers: list[Answer],
) -> None:
    assert mismatches(openapi(), answers) == []


def component(document: dict[str, Any], name: str) -> Draft202012Validator:
    """A validator of `components.schemas.<name>` of an OpenAPI 3.1 document (whose schemas are
    JSON Schema 2020-12)."""
    registry: Registry[Any] = Registry().with_resource(
        "urn:openapi", Resource.from_contents(document, default_specification=DRAFT202012)
    )
    return Draft202012Validator(
        {"$ref": f"urn:openapi#/components/schemas/{name}"}, registry=registry
    )


async def test_each_event_of_the_update_stream_is_a_session_update(
    answers: list[Answer],
) -> None:
    (stream,) = [
        a for a in answers if a.probe.template.endswith("/updates") and a.probe.status == 200
    ]
    frames = list(sse_data(stream.response.content))
    check = component(openapi(), "SessionUpdate")
    for frame in frames:
        check.validate(frame)
    assert [f["sessionUpdate"] for f in frames][-1] == "turn_finished"


def invalid(document: dict[str, Any], reads: list[Read], dead: set[str]) -> list[str]:
    """What of `reads` the document's messages refuse; inbound entries the workers
    dead-lettered are skipped (they are the ones a reader cannot decode)."""
    validators = {channel: validator(document, channel) for channel in document["channels"]}
    found = []
    for read in reads:
        if read.channel == "inbound" and read.where in dead:
            continue
        assert read.value is not UNDECODABLE, f"{read.where} was not dead-lettered"
        check = validators.get(read.channel)
        if check is None:
            found.append(f"{read.where}: the document has no channel {read.channel!r}")
            continue
        found += [f"{read.where}: {e.message}" for e in check.iter_errors(read.value)]
    return found


def dead_sources(reads: list[Read]) -> set[str]:
    return {
        f"{r.value['source_stream']} {r.value['source_id']}" for r in reads if r.channel == "dead"
    }


async def test_what_a_worker_wrote_is_what_the_asyncapi_document_says(
    answers: list[Answer], redis: Redis, prefix: str
) -> None:
    reads = await read_channels(redis, prefix, PARTITIONS)
    assert invalid(load(), reads, dead_sources(reads)) == []
    assert {r.channel for r in reads} >= {"inbound", "session", "commands", "messages"}


@pytest.mark.parametrize("directory", versions()[-1:], ids=lambda d: d.name)
async def test_a_golden_log_folded_into_redis_is_what_the_asyncapi_document_says(
    redis: Redis, prefix: str, directory: Path
) -> None:
    await replay_dir(redis, directory, prefix, f"{prefix}:replay")
    log = await read_channels(redis, prefix, PARTITIONS)
    folded = await read_channels(redis, f"{prefix}:replay", PARTITIONS)
    inbound = [r for r in log if r.channel == "inbound"]
    assert invalid(load(), inbound + folded, dead_sources(folded)) == []
    assert {r.channel for r in folded} == set(load()["channels"]) - {"inbound"}
    frames = {r.value["sessionUpdate"] for r in folded if r.channel == "session"}
    assert {"agent_error", "retrying", "tool_call", "attempt_discarded"} <= frames


def test_the_check_fails_on_a_status_no_route_answers(answers: list[Answer]) -> None:
    document = openapi()
    document["paths"]["/v1/turns/{turn_id}"]["get"]["responses"]["418"] = {"description": "x"}
    assert mismatches(document, answers) == [
        "GET /v1/turns/{turn_id}: openapi.json lists 418, which no probe obtained: remove it "
        "(service/contract/openapi.py) if the route cannot answer it, else add its probe "
        "(service/conformance/probes.py)"
    ]
