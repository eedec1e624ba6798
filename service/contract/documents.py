"""Every contract document, as the bytes of its file (sorted keys, two-space indent)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from terminus.events.inbound import InboundEvent
from terminus.events.outbound import (
    PartialRecord,
    PersistedMessage,
    ProducerCommand,
    SessionUpdate,
    TurnStatus,
)
from terminus.service.contract.asyncapi import asyncapi
from terminus.service.contract.bodies import OPENAPI_TYPES
from terminus.service.contract.openapi import openapi
from terminus.service.contract.typescript import typescript

Types = Mapping[str, Any]  # document stem -> the type it describes

JSON_SCHEMA: Final = "https://json-schema.org/draft/2020-12/schema"
TYPES: Final[Types] = {
    "inbound-event": InboundEvent,
    "frame": SessionUpdate,
    "command": ProducerCommand,
    "message": PersistedMessage,
    "partial": PartialRecord,
    "turn-status": TurnStatus,
}
# The unions, which have no name of their own, under these names in components.schemas (a
# Struct is there under its own name).
ROOT_NAMES: Final = {
    "inbound-event": "InboundEvent",
    "frame": "SessionUpdate",
    "command": "ProducerCommand",
    "turn-status": "TurnStatus",
}
TITLES: Final = {
    "inbound-event": "An event a producer appends to terminus:{p}:in (field e)",
    "frame": "A session update the workers append to terminus:{p}:session:<sid> (field e)",
    "command": "What a producer must act on, from terminus:{p}:commands (field e)",
    "message": "A persisted assistant message (terminus:{p}:messages:<sid>)",
    "partial": "A failed attempt's content, kept for inspection (terminus:{p}:partials:<sid>)",
    "turn-status": "What a frontend's LiveSession (both SDKs) says of a turn",
}


def documents(types: Types | None = None) -> dict[str, bytes]:
    """File name -> contents of every contract document, made from `types` (default `TYPES`)."""
    types = TYPES if types is None else types
    made = {f"{stem}.schema.json": _schema(stem, t) for stem, t in types.items()}
    roots, components = msgspec.json.schema_components(
        [*types.values(), *OPENAPI_TYPES.values()], ref_template="#/components/schemas/{name}"
    )
    schemas = open_objects({**components, **_unions(types, roots[: len(types)])})
    made["asyncapi.json"] = _encode(asyncapi(schemas))
    made["openapi.json"] = _encode(openapi(schemas))
    made["contract.ts"] = typescript(schemas)
    return made


def _unions(types: Types, roots: Sequence[Any]) -> dict[str, Any]:
    """The roots that are unions, under their names. A Struct's root is only a `$ref` to its
    own component: named after itself it would replace that component with a reference to
    itself, which no validator can resolve."""
    return {
        ROOT_NAMES.get(stem, stem): root
        for stem, root in zip(types, roots, strict=True)
        if "$ref" not in root
    }


def open_objects(schema: Any) -> Any:
    """`schema` with every object of no declared properties (a `dict[str, Any]`: a tool's
    input, a timeline item's detail) saying that it takes any: `additionalProperties: true`.
    The same in JSON Schema, but a generator reads a bare `{"type": "object"}` as an object
    that has no properties at all (openapi-typescript: `Record<string, never>`)."""
    if isinstance(schema, list):
        return [open_objects(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    opened = {key: open_objects(value) for key, value in schema.items()}
    bare = schema.get("type") == "object" and not {"properties", "additionalProperties"} & set(
        schema
    )
    return opened | ({"additionalProperties": True} if bare else {})


def _schema(stem: str, kind: Any) -> bytes:
    schema = open_objects(msgspec.json.schema(kind))
    document = {
        "$schema": JSON_SCHEMA,
        "$id": f"{stem}.schema.json",
        "title": TITLES.get(stem, stem),
        **schema,
    }
    return _encode(document)


def _encode(document: object) -> bytes:
    return msgspec.json.format(msgspec.json.encode(document, order="sorted"), indent=2) + b"\n"
