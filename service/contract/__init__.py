"""The published contract, generated from the code: JSON Schema of every message, an AsyncAPI 3
document of the streams, an OpenAPI 3.1 document of the gateway and the TypeScript types of
what a frontend reads (docs/contract/).

`terminus contract` writes them; `terminus contract --check` (and a test) fails when the
committed files differ from what the code says, so a field added to a frame without regenerating
is caught. FastStream's own AsyncAPI generator does not read msgspec Structs, so the schemas come
from `msgspec.json.schema_components`.
"""

from __future__ import annotations

from pathlib import Path

from terminus.service.contract.documents import Types, documents


def drift(directory: Path, types: Types | None = None) -> list[str]:
    """The documents whose committed file in `directory` differs from the code (or is missing),
    and files there that the code no longer makes."""
    made = documents(types)
    found = {p.name for p in directory.iterdir() if p.is_file()} if directory.is_dir() else set()
    stale = [name for name, body in made.items() if _read(directory / name) != body]
    return sorted(stale + [name for name in found - made.keys()])


def write(directory: Path, types: Types | None = None) -> list[str]:
    """Write every document into `directory`; returns the names written."""
    directory.mkdir(parents=True, exist_ok=True)
    made = documents(types)
    for name, body in made.items():
        (directory / name).write_bytes(body)
    for gone in {p.name for p in directory.iterdir() if p.is_file()} - made.keys():
        (directory / gone).unlink()
    return sorted(made)


def _read(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


__all__ = ["documents", "drift", "write"]
