"""The turn state diagram, drawn from the machine's own table (`statemachines/table.py`).

Two renderings of one edge list: Mermaid `stateDiagram-v2` text (GitHub renders it in the README)
and a standalone SVG laid out here in pure Python, so the inspector page needs no JS library and
works offline. `transitions` can print Mermaid too, but it names states by their enum names and
marks the initial state as active; a unit test checks our edges against its graph instead.

Layout: ranks left to right by breadth-first distance from `pending`, final states in the last
rank; in a rank, states sit near the mean slot of their predecessors. Each edge is a quadratic
curve bent just enough to miss the other states and the labels already placed.

    python -m terminus.service.gateway.diagram \
        --svg docs/state-diagram.svg --mermaid docs/state-diagram.mmd
"""

from __future__ import annotations

import argparse
import math
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, NamedTuple
from xml.sax.saxutils import escape, quoteattr

from terminus.statemachines.states import FINAL_STATES, TurnState
from terminus.statemachines.table import TABLE

INITIAL: Final = TurnState.PENDING.value
ORDER: Final = tuple(s.value for s in TurnState)
FINALS: Final = tuple(s for s in ORDER if TurnState(s) in FINAL_STATES)
MUTED: Final = frozenset((TurnState.FAILED.value, TurnState.CANCELLED.value))
COLOURS: Final = {
    "pending": "#e5e7eb",
    "streaming": "#bfdbfe",
    "awaiting_terminal": "#c7d2fe",
    "awaiting_step": "#ddd6fe",
    "truncated": "#fed7aa",
    "retrying": "#fde68a",
    "finished": "#bbf7d0",
    "failed": "#fecaca",
    "cancelled": "#d1d5db",
}
BOX_W, BOX_H, RANK_GAP, SLOT_GAP, MARGIN = 150.0, 34.0, 215.0, 100.0, 24.0
FONT_PX, LABEL_LINE, CHAR_W = 11, 13.0, 6.3
BENDS: Final = (0, 28, -28, 56, -56, 84, -84, 112, -112, 150, -150, 190, -190)

Point = tuple[float, float]
Box = tuple[float, float, float, float]  # left, top, right, bottom


class Edge(NamedTuple):
    """Every trigger that moves a turn from `source` to `dest`, in table order."""

    source: str
    dest: str
    triggers: tuple[str, ...]


class Route(NamedTuple):
    edge: Edge
    start: Point
    control: Point
    end: Point
    label: Box


def edges(table: Sequence[Sequence[Any]] = TABLE) -> list[Edge]:
    """One edge per (source, dest) pair of the table's rows, in the order the table names them."""
    merged: dict[tuple[str, str], list[str]] = {}
    for trigger, sources, dest in table:
        for source in sources if isinstance(sources, list) else [sources]:
            merged.setdefault((str(source), str(dest)), []).append(str(trigger))
    return [Edge(s, d, tuple(t)) for (s, d), t in merged.items()]


def mermaid(table: Sequence[Sequence[Any]] = TABLE) -> str:
    """The table as a Mermaid `stateDiagram-v2`, states coloured as in the inspector."""
    lines = ["stateDiagram-v2", "    direction LR", f"    [*] --> {INITIAL}"]
    lines += [f"    {e.source} --> {e.dest}: {' | '.join(e.triggers)}" for e in edges(table)]
    lines += [f"    {state} --> [*]" for state in FINALS]
    lines += [f"    classDef st_{s} fill:{COLOURS[s]},color:#111827" for s in ORDER]
    lines += [f"    class {s} st_{s}" for s in ORDER]
    return "\n".join(lines) + "\n"


def ranks(graph: Sequence[Edge]) -> list[list[str]]:
    """States by breadth-first distance from the initial state; final states last."""
    depth = {INITIAL: 0}
    queue = deque([INITIAL])
    while queue:
        state = queue.popleft()
        for edge in graph:
            if edge.source == state and edge.dest not in depth:
                depth[edge.dest] = depth[state] + 1
                queue.append(edge.dest)
    live = [s for s in ORDER if s not in FINALS]
    grouped: list[list[str]] = [[] for _ in range(max(depth.get(s, 0) for s in live) + 1)]
    for state in live:
        grouped[depth.get(state, 0)].append(state)
    return [*grouped, list(FINALS)]


def slots(grouped: Sequence[Sequence[str]], graph: Sequence[Edge]) -> dict[str, int]:
    """Each state's row: near its predecessors' mean row, in enum order on ties, no overlaps."""
    width = max(len(rank) for rank in grouped)
    placed: dict[str, int] = {}
    for rank in grouped:
        wanted = {
            s: _mean(
                [placed[e.source] for e in graph if e.dest == s and e.source in placed],
                (width - 1) / 2,
            )
            for s in rank
        }
        rows: list[int] = []
        for state in sorted(rank, key=lambda s: wanted[s]):
            rows.append(max(round(wanted[state]), rows[-1] + 1 if rows else 0))
        shift = max(0, rows[-1] - (width - 1))
        for state, row in zip(sorted(rank, key=lambda s: wanted[s]), rows, strict=True):
            placed[state] = row - shift
    return placed


def _mean(values: list[int], default: float) -> float:
    return sum(values) / len(values) if values else default


def boxes(graph: Sequence[Edge]) -> dict[str, Box]:
    """Each state's box, ranks as columns and slots as rows."""
    grouped = ranks(graph)
    rows = slots(grouped, graph)
    found: dict[str, Box] = {}
    for column, rank in enumerate(grouped):
        for state in rank:
            x, y = column * RANK_GAP, rows[state] * SLOT_GAP
            found[state] = (x, y, x + BOX_W, y + BOX_H)
    return found


def route_all(graph: Sequence[Edge], placed: dict[str, Box]) -> list[Route]:
    """Routes for every edge: short ones first so they stay straight, muted ones last."""

    def length(edge: Edge) -> tuple[bool, float]:
        return edge.dest in MUTED, math.dist(
            _centre(placed[edge.source]), _centre(placed[edge.dest])
        )

    routes: list[Route] = []
    for edge in sorted(graph, key=length):
        candidates = [_route(edge, placed, bend) for bend in BENDS]
        routes.append(min(candidates, key=lambda r: _cost(r, placed, routes)))
    return routes


def _route(edge: Edge, placed: dict[str, Box], bend: float) -> Route:
    (ax, ay), (bx, by) = _centre(placed[edge.source]), _centre(placed[edge.dest])
    span = math.dist((ax, ay), (bx, by)) or 1.0
    normal = (-(by - ay) / span, (bx - ax) / span)
    control = ((ax + bx) / 2 + normal[0] * bend * 2, (ay + by) / 2 + normal[1] * bend * 2)
    start = _exit(placed[edge.source], control)
    end = _exit(placed[edge.dest], control)
    mid = _bezier(start, control, end, 0.5)
    width = max(len(t) for t in edge.triggers) * CHAR_W + 6
    height = len(edge.triggers) * LABEL_LINE + 2
    label = (mid[0] - width / 2, mid[1] - height / 2, mid[0] + width / 2, mid[1] + height / 2)
    return Route(edge, start, control, end, label)


def _cost(route: Route, placed: dict[str, Box], done: Sequence[Route]) -> float:
    others = [b for s, b in placed.items() if s not in (route.edge.source, route.edge.dest)]
    samples = [_bezier(route.start, route.control, route.end, i / 24) for i in range(2, 23)]
    hits = sum(_inside(p, _grow(b, 6)) for p in samples for b in others)
    labels = [r.label for r in done]
    crowded = sum(_overlap(route.label, b) for b in [*placed.values(), *labels])
    lines = sum(_inside(p, _grow(r.label, 2)) for p in samples for r in done)
    return hits * 1000 + crowded * 400 + lines * 40  # ties keep the smaller bend (tried first)


def _centre(box: Box) -> Point:
    return (box[0] + box[2]) / 2, (box[1] + box[3]) / 2


def _exit(box: Box, towards: Point) -> Point:
    """Where the segment from the box's centre towards `towards` leaves the box."""
    cx, cy = _centre(box)
    dx, dy = towards[0] - cx, towards[1] - cy
    scale = min(
        (box[2] - cx) / abs(dx) if dx else math.inf, (box[3] - cy) / abs(dy) if dy else math.inf
    )
    return cx + dx * scale, cy + dy * scale


def _bezier(a: Point, c: Point, b: Point, t: float) -> Point:
    u = 1 - t
    return u * u * a[0] + 2 * u * t * c[0] + t * t * b[0], u * u * a[1] + 2 * u * t * c[
        1
    ] + t * t * b[1]


def _inside(p: Point, box: Box) -> bool:
    return box[0] <= p[0] <= box[2] and box[1] <= p[1] <= box[3]


def _overlap(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _grow(box: Box, by: float) -> Box:
    return box[0] - by, box[1] - by, box[2] + by, box[3] + by


def svg(table: Sequence[Sequence[Any]] = TABLE) -> str:
    """The table as a standalone SVG: `g.sd-state[data-state]` per state, `path.sd-edge` and
    `g.sd-label` per edge with `data-source`/`data-dest`, so a page can highlight a turn's path."""
    graph = edges(table)
    placed = boxes(graph)
    routes = route_all(graph, placed)
    left, top, right, bottom = _bounds([*placed.values(), *(r.label for r in routes)], routes)
    head = (
        '<svg xmlns="http://www.w3.org/2000/svg" class="sd" role="img" '
        f'aria-label="turn state diagram" viewBox="{_n(left)} {_n(top)} {_n(right - left)} '
        f'{_n(bottom - top)}" width="{_n(right - left)}" height="{_n(bottom - top)}" '
        f'font-family="sans-serif" font-size="{FONT_PX}">'
    )
    parts = [head, _markers(), _start_dot(placed[INITIAL])]
    parts += ['<g class="sd-edges">', *(_path(r) for r in routes), "</g>"]
    parts += ['<g class="sd-labels">', *(_label(r) for r in routes), "</g>"]
    parts += ['<g class="sd-states">', *(_state(s, b) for s, b in placed.items()), "</g>"]
    return "\n".join([*parts, "</svg>"]) + "\n"


def _bounds(items: Sequence[Box], routes: Sequence[Route]) -> Box:
    curve = [_bezier(r.start, r.control, r.end, i / 16) for r in routes for i in range(17)]
    xs = [x for b in items for x in (b[0], b[2])] + [p[0] for p in curve]
    ys = [y for b in items for y in (b[1], b[3])] + [p[1] for p in curve]
    return min(xs) - MARGIN - 30, min(ys) - MARGIN, max(xs) + MARGIN, max(ys) + MARGIN


def _markers() -> str:
    def marker(name: str, colour: str) -> str:
        return (
            f'<marker id="{name}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            f'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
            f'fill="{colour}"/></marker>'
        )

    arrows = [("sd-arrow", "#4b5563"), ("sd-arrow-muted", "#b8bec8"), ("sd-arrow-taken", "#1d4ed8")]
    return "<defs>" + "".join(marker(n, c) for n, c in arrows) + "</defs>"


def _start_dot(box: Box) -> str:
    x, y = box[0] - 26, _centre(box)[1]
    return (
        f'<circle cx="{_n(x)}" cy="{_n(y)}" r="6" fill="#111827"/>'
        f'<path d="M{_n(x + 6)},{_n(y)} L{_n(box[0])},{_n(y)}" stroke="#4b5563" '
        'stroke-width="1.4" marker-end="url(#sd-arrow)"/>'
    )


def _path(route: Route) -> str:
    muted = route.edge.dest in MUTED
    (sx, sy), (cx, cy), (ex, ey) = route.start, route.control, route.end
    return (
        f'<path class="sd-edge" {_ends(route.edge)} '
        f"data-triggers={quoteattr(' '.join(route.edge.triggers))} "
        f'd="M{_n(sx)},{_n(sy)} Q{_n(cx)},{_n(cy)} {_n(ex)},{_n(ey)}" fill="none" '
        f'stroke="{"#b8bec8" if muted else "#4b5563"}" stroke-width="1.4" '
        f'marker-end="url(#sd-arrow{"-muted" if muted else ""})"/>'
    )


def _label(route: Route) -> str:
    left, top, right, bottom = route.label
    colour = "#8b93a1" if route.edge.dest in MUTED else "#374151"
    lines = [
        f'<text x="{_n((left + right) / 2)}" y="{_n(top + LABEL_LINE * (i + 1) - 2)}" '
        f'text-anchor="middle" fill="{colour}">{escape(trigger)}</text>'
        for i, trigger in enumerate(route.edge.triggers)
    ]
    return (
        f'<g class="sd-label" {_ends(route.edge)}><rect x="{_n(left)}" y="{_n(top)}" '
        f'width="{_n(right - left)}" height="{_n(bottom - top)}" rx="3" fill="#ffffff" '
        f'fill-opacity="0.85"/>{"".join(lines)}</g>'
    )


def _state(state: str, box: Box) -> str:
    left, top = box[0], box[1]
    final = state in FINALS
    inner = (
        f'<rect x="{_n(left + 3)}" y="{_n(top + 3)}" width="{_n(BOX_W - 6)}" '
        f'height="{_n(BOX_H - 6)}" rx="6" fill="none" stroke="#374151" stroke-width="1"/>'
        if final
        else ""
    )
    cx, cy = _centre(box)
    return (
        f'<g class="sd-state" data-state={quoteattr(state)}><rect x="{_n(left)}" y="{_n(top)}" '
        f'width="{_n(BOX_W)}" height="{_n(BOX_H)}" rx="8" fill="{COLOURS.get(state, "#ffffff")}" '
        f'stroke="#374151" stroke-width="1.2"/>{inner}<text x="{_n(cx)}" y="{_n(cy + 4)}" '
        f'text-anchor="middle" font-size="13" fill="#111827">{escape(state)}</text></g>'
    )


def _ends(edge: Edge) -> str:
    return f"data-source={quoteattr(edge.source)} data-dest={quoteattr(edge.dest)}"


def _n(value: float) -> str:
    """A coordinate with one decimal: the same text on every machine, so docs can be compared."""
    return f"{value:.1f}".removesuffix(".0")


def main(argv: Sequence[str] | None = None) -> int:
    """Write the diagram files (or print the Mermaid text when no file is named)."""
    parser = argparse.ArgumentParser(
        prog="python -m terminus.service.gateway.diagram",
        description="The turn state diagram, from TABLE.",
    )
    parser.add_argument("--svg", type=Path, help="write the SVG here")
    parser.add_argument("--mermaid", type=Path, help="write the Mermaid text here")
    args = parser.parse_args(argv)
    if args.svg is None and args.mermaid is None:
        print(mermaid(), end="")
    if args.svg is not None:
        args.svg.write_text(svg())
    if args.mermaid is not None:
        args.mermaid.write_text(mermaid())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
