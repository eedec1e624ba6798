"""Vertex AI streamed function-call arguments (`functionCall.partialArgs`) -> one args object.

Each partial argument names a JSONPath (`$.a[0].b`) and one value. A string value whose
`willContinue` is set is continued by the next string for the same path.
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Any, Final

import msgspec

from terminus.events.adapters.values import obj, string

_VALUE_KEYS: Final = ("stringValue", "numberValue", "boolValue", "nullValue")
_SEGMENT = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")

Segment = str | int


class StreamedCall(msgspec.Struct):
    """A function call whose arguments are still arriving."""

    call_id: str
    name: str
    values: dict[str, Any] = msgspec.field(default_factory=dict)
    continuing: set[str] = msgspec.field(default_factory=set)

    def add(self, partial_args: list[Any]) -> None:
        """Record one chunk's `partialArgs`; entries without a value are skipped."""
        for item in partial_args:
            self._add_one(obj(item))

    def args(self) -> dict[str, Any]:
        """The arguments received so far, as a nested object."""
        root: dict[str, Any] = {}
        for path, value in self.values.items():
            segments = _segments(path)
            if segments:
                _assign(root, segments, value)
        return root

    def _add_one(self, arg: dict[str, Any]) -> None:
        key = next((k for k in _VALUE_KEYS if k in arg), None)
        if key is None:
            return
        path = string(arg.get("jsonPath"))
        value = None if key == "nullValue" else arg[key]
        if isinstance(value, str) and path in self.continuing:
            value = string(self.values.get(path)) + value
        self.values[path] = value
        if arg.get("willContinue") is True:
            self.continuing.add(path)
        else:
            self.continuing.discard(path)


def _segments(path: str) -> list[Segment] | None:
    if not path.startswith("$"):
        return None
    matches = list(_SEGMENT.finditer(path, 1))
    if sum(len(m.group(0)) for m in matches) != len(path) - 1:
        return None
    return [m.group(1) if m.group(1) is not None else int(m.group(2)) for m in matches]


def _assign(root: dict[str, Any], segments: list[Segment], value: Any) -> None:
    node: Any = root
    for segment, following in pairwise(segments):
        child = _child(node, segment)
        if child is None:
            child = [] if isinstance(following, int) else {}
            _put(node, segment, child)
        node = child
    _put(node, segments[-1], value)


def _child(node: Any, segment: Segment) -> Any:
    if isinstance(node, dict) and isinstance(segment, str):
        return node.get(segment)
    if isinstance(node, list) and isinstance(segment, int) and segment < len(node):
        return node[segment]
    return None


def _put(node: Any, segment: Segment, value: Any) -> None:
    if isinstance(node, dict) and isinstance(segment, str):
        node[segment] = value
    elif isinstance(node, list) and isinstance(segment, int):
        node.extend([None] * (segment + 1 - len(node)))
        node[segment] = value
