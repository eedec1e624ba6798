"""docs/providers.md names every provider terminus has a table for and every error-body rule, so
that the note cannot drift from the code: a compatible provider added to DIALECTS, or a rule added
to statemachines/error_bodies.py, fails here until the note has its row."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import pytest

from terminus.events.adapters import PROVIDERS
from terminus.events.adapters.compat import DIALECTS, PREFIX
from terminus.statemachines.error_bodies import RULES, BodyRule

NOTE: Final = Path(__file__).resolve().parents[2] / "docs" / "providers.md"
# What a row quotes: "double-quoted" text and `code spans`.
QUOTED: Final = re.compile(r'"([^"\n]+)"|`([^`\n]+)`')


def lines() -> list[str]:
    return NOTE.read_text().splitlines()


def compatible_rows() -> set[str]:
    """The names in the first cell of the note's compatible-servers table."""
    return {m.group(1) for line in lines() if (m := re.match(r"\| `([a-z-]+)` \|", line))}


def quotes(line: str) -> list[str]:
    """What a line quotes, a count the note writes as N or M read as a number."""
    return [re.sub(r"\b[NM]\b", "1", a or b) for a, b in QUOTED.findall(line)]


def alternatives(rule: BodyRule) -> list[re.Pattern[str]]:
    """The rule's pattern split at its top-level `|`: each message it reads, on its own."""
    parts, depth, start, text = [], 0, 0, rule.pattern.pattern
    for at, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0) if text[at - 1 : at] != "\\" else 0
        if char == "|" and depth == 0 and text[at - 1 : at] != "\\":
            parts.append(text[start:at])
            start = at + 1
    return [re.compile(p, rule.pattern.flags) for p in [*parts, text[start:]]]


def documents_rule(line: str, rule: BodyRule) -> bool:
    """Whether a line of the note names the rule's provider and quotes every message it reads."""
    said = quotes(line)
    return rule.provider in line.lower() and all(
        any(alternative.search(q) for q in said) for alternative in alternatives(rule)
    )


def test_the_compatible_table_has_a_row_for_every_named_provider() -> None:
    assert compatible_rows() == set(DIALECTS)


def test_every_official_provider_is_named() -> None:
    official = {p for p in PROVIDERS if not p.startswith(PREFIX)}
    text = NOTE.read_text()
    assert {p for p in official if f"`{p}`" not in text} == set()


@pytest.mark.parametrize("rule", RULES, ids=lambda r: f"{r.provider}-{r.reason}")
def test_every_error_body_rule_is_quoted_in_its_providers_row(rule: BodyRule) -> None:
    assert any(documents_rule(line, rule) for line in lines())


def test_a_removed_row_is_reported() -> None:
    trimmed = [line for line in lines() if not line.startswith("| `ollama` |")]
    ollama = next(r for r in RULES if r.provider == "ollama")
    assert not any(documents_rule(line, ollama) for line in trimmed)
