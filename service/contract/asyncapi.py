"""The AsyncAPI 3 document of the streams a producer, a frontend and an operator touch."""

from __future__ import annotations

from typing import Any, Final

from terminus.events.versions import CURRENT
from terminus.service.keys import DEFAULT_PREFIX, FIELD, Keys

ENTRY: Final = (
    f"One stream entry with one field, `{FIELD.decode()}`, holding the payload's JSON bytes."
)
PARTITION: Final = {
    "description": "The session's partition: CRC-32 (IEEE, as zlib computes it) of the UTF-8 "
    "session id, modulo the deployment's partition count P (TERMINUS_PARTITIONS, default 16). "
    "The braces around it are part of the key: a Redis Cluster hash tag, so that all keys of "
    "a partition live in one slot.",
}
SESSION: Final = {"description": "The session id, as the producer wrote it."}


def _address(name: str) -> str:
    """A key of `Keys` with the partition and the session as AsyncAPI parameters."""
    sample = Keys(0, DEFAULT_PREFIX)
    key: str = getattr(sample, name) if name != "session" else sample.session("{sessionId}")
    return key.replace("{0}", "{p}")


def _channel(name: str, message: str, description: str) -> dict[str, Any]:
    address = _address(name)
    parameters = {"p": PARTITION} | ({"sessionId": SESSION} if "{sessionId}" in address else {})
    return {
        "address": address,
        "description": description,
        "parameters": parameters,
        "messages": {message: {"$ref": f"#/components/messages/{message}"}},
    }


def _message(
    schema: str, summary: str, content_type: str = "application/json", description: str = ENTRY
) -> dict[str, Any]:
    return {
        "name": schema,
        "summary": summary,
        "description": description,
        "contentType": content_type,
        "payload": {"$ref": f"#/components/schemas/{schema}"},
    }


def _operation(action: str, channel: str, message: str, summary: str) -> dict[str, Any]:
    return {
        "action": action,
        "channel": {"$ref": f"#/channels/{channel}"},
        "messages": [{"$ref": f"#/channels/{channel}/messages/{message}"}],
        "summary": summary,
    }


DEAD_LETTER: Final = {
    "type": "object",
    "description": "A dead letter: four fields of the stream entry itself (not JSON in `e`).",
    "properties": {
        "raw": {
            "type": "string",
            "description": "the entry's bytes as they were (or its first KiB)",
        },
        "reason": {"type": "string", "description": "why it was refused, naming the field"},
        "source_stream": {"type": "string", "description": "the inbound log it came from"},
        "source_id": {"type": "string", "description": "its id in that log"},
    },
    "required": ["raw", "reason", "source_stream", "source_id"],
}


def asyncapi(schemas: dict[str, Any]) -> dict[str, Any]:
    """The document, its payloads referring to `schemas` (components.schemas)."""
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "terminus streams",
            "version": str(CURRENT),
            "description": "The Redis Streams of terminus (docs/design.md section 1). Keys are "
            f"shown with the default prefix `{DEFAULT_PREFIX}` (TERMINUS_PREFIX). Producers "
            "XADD events to the inbound log and read the commands stream; frontends read a "
            "session's stream (XREAD from a cursor, or the gateway's SSE); workers write "
            "everything else. Inbound events carry `v`, the contract version "
            "(docs/schema.md); a producer may write MessagePack instead of JSON (the first "
            "byte tells).",
        },
        "defaultContentType": "application/json",
        "servers": {
            "redis": {
                "host": "127.0.0.1:6379",
                "protocol": "redis",
                "description": "Any Redis >= 6.2, or a Redis Cluster; REDIS_URL.",
            }
        },
        "channels": {
            "inbound": _channel(
                "inbound", "inboundEvent", "The inbound log, the source of truth for replay."
            ),
            "session": _channel(
                "session", "frame", "A session's updates for its frontends (MAXLEN ~)."
            ),
            "commands": _channel(
                "commands", "command", "What the producers of the partition's turns act on."
            ),
            "dead": _channel("dead", "deadLetter", "Inbound entries refused, with the reason."),
        },
        "operations": {
            "publishEvent": _operation(
                "send", "inbound", "inboundEvent", "A producer appends a turn's events in order."
            ),
            "readCommands": _operation(
                "receive", "commands", "command", "A producer reads the decisions about its turns."
            ),
            "readFrames": _operation(
                "receive", "session", "frame", "A frontend follows a session from a cursor."
            ),
            "readDeadLetters": _operation(
                "receive", "dead", "deadLetter", "An operator reads what was refused, and why."
            ),
        },
        "components": {
            "schemas": {**schemas, "DeadLetter": DEAD_LETTER},
            "messages": {
                "inboundEvent": _message("InboundEvent", "An inbound event"),
                "frame": _message("SessionUpdate", "A session update (frame)"),
                "command": _message("ProducerCommand", "A producer command"),
                "deadLetter": _message("DeadLetter", "A dead letter", "application/octet-stream"),
            },
        },
    }
