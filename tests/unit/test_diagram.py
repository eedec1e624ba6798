"""The state diagram (service/gateway/diagram.py) is the machine's table, whole, and the docs hold
what the generator draws now: a change to TABLE that is not redrawn fails here."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from itertools import combinations
from pathlib import Path
from typing import Final

from terminus.service.gateway import diagram
from terminus.statemachines.states import FINAL_STATES, TurnState
from terminus.statemachines.table import MACHINE, TABLE

DOCS: Final = Path(__file__).resolve().parents[2] / "docs"
SVG_NS: Final = "{http://www.w3.org/2000/svg}"
Triple = tuple[str, str, str]  # source, dest, trigger


def machine_edges() -> set[Triple]:
    """Every (source, dest, trigger) the running `transitions` Machine knows."""
    found: set[Triple] = set()
    for name, event in MACHINE.events.items():
        for source, moves in event.transitions.items():
            found |= {(_value(source), _value(str(move.dest)), str(name)) for move in moves}
    return found


def _value(name: str) -> str:
    return TurnState[name].value  # transitions names enum states by their member names


def table_edges() -> set[Triple]:
    rows = [
        (src, dest, trig)
        for trig, srcs, dest in TABLE
        for src in (srcs if isinstance(srcs, list) else [srcs])
    ]
    return {(str(s), str(d), str(t)) for s, d, t in rows}


def test_the_machine_and_its_table_agree_so_drawing_the_table_draws_the_machine() -> None:
    assert machine_edges() == table_edges()


def test_the_edge_list_is_the_table_with_each_pair_once() -> None:
    drawn = diagram.edges()
    assert {(e.source, e.dest, t) for e in drawn for t in e.triggers} == table_edges()
    assert len({(e.source, e.dest) for e in drawn}) == len(drawn)


def test_the_mermaid_text_has_exactly_the_table_s_edges_and_marks_start_and_ends() -> None:
    text = diagram.mermaid()
    pairs = re.findall(r"^ {4}(\w+) --> (\w+): (.+)$", text, re.MULTILINE)
    drawn = {(s, d, t) for s, d, triggers in pairs for t in triggers.split(" | ")}
    assert drawn == table_edges()
    assert "[*] --> pending" in text
    assert {s for s in re.findall(r"^ {4}(\w+) --> \[\*\]$", text, re.MULTILINE)} == {
        s.value for s in FINAL_STATES
    }


def test_the_svg_has_every_state_once_and_exactly_the_table_s_edges() -> None:
    root = ET.fromstring(diagram.svg())
    states = [g.get("data-state") for g in root.iter(f"{SVG_NS}g") if g.get("class") == "sd-state"]
    assert sorted(s for s in states if s) == sorted(s.value for s in TurnState)
    paths = [p for p in root.iter(f"{SVG_NS}path") if p.get("class") == "sd-edge"]
    drawn = {
        (p.get("data-source", ""), p.get("data-dest", ""), t)
        for p in paths
        for t in p.get("data-triggers", "").split()
    }
    assert drawn == table_edges()
    assert len(paths) == len(diagram.edges())


def test_ranks_start_at_pending_end_with_the_final_states_and_no_boxes_overlap() -> None:
    graph = diagram.edges()
    grouped = diagram.ranks(graph)
    assert grouped[0] == ["pending"]
    assert set(grouped[-1]) == {s.value for s in FINAL_STATES}
    boxes = diagram.boxes(graph)
    for (a, box_a), (b, box_b) in combinations(boxes.items(), 2):
        assert not diagram._overlap(box_a, box_b), (a, b)


def test_the_docs_hold_what_the_generator_draws_now(tmp_path: Path) -> None:
    """Redraw with `python -m terminus.service.gateway.diagram --svg docs/state-diagram.svg
    --mermaid docs/state-diagram.mmd`."""
    assert (DOCS / "state-diagram.svg").read_text() == diagram.svg()
    assert (DOCS / "state-diagram.mmd").read_text() == diagram.mermaid()
    assert f"```mermaid\n{diagram.mermaid()}```" in (DOCS.parent / "README.md").read_text()
    assert (
        diagram.main(["--svg", str(tmp_path / "d.svg"), "--mermaid", str(tmp_path / "d.mmd")]) == 0
    )
    assert (tmp_path / "d.svg").read_text() == diagram.svg()
    assert (tmp_path / "d.mmd").read_text() == diagram.mermaid()
