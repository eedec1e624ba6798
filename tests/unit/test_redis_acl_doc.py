"""The ACL lines a deployment copies from the docs grant what the gate's TLS + ACL pass proves is
enough (tests/secure_redis.py): a command added to the service's list and not to the docs, or the
other way round, fails here rather than in a deployment."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import pytest
from secure_redis import producer_rules, reader_rules, service_rules

DOCS: Final = Path(__file__).parents[2] / "docs"
PLACES: Final = ("security.md",)
PREFIX: Final = "terminus"
PARTITIONS: Final = 16
ELIDED: Final = "..."


def documented(user: str) -> list[list[str]]:
    """Each `ACL SETUSER <user> ...` line of the docs, split into its words."""
    lines = []
    for name in PLACES:
        path = DOCS / name
        if path.exists():
            text = path.read_text(encoding="utf-8")
            lines += re.findall(rf"^ACL SETUSER {user} .*$", text, flags=re.MULTILINE)
    return [line.split() for line in lines]


def setuser(user: str, rules: list[str]) -> list[str]:
    return ["ACL", "SETUSER", user, "on", ">PASSWORD", *rules]


def elided(rules: list[str]) -> list[str]:
    """The producer's rules as the docs write them: the first two logs, `...`, the last."""
    logs = [rule for rule in rules if rule.startswith("~") and rule.endswith(":in")]
    start = rules.index(logs[0])
    return [*rules[:start], *logs[:2], ELIDED, logs[-1], *rules[start + len(logs) :]]


@pytest.mark.parametrize(
    ("user", "rules"),
    [
        ("terminus", service_rules([f"{PREFIX}:*", f"{PREFIX}-replay:*"], [f"{PREFIX}:control"])),
        ("producer", elided(producer_rules(PREFIX, PARTITIONS))),
        ("reader", reader_rules(PREFIX)),
    ],
)
def test_the_documented_acl_line_grants_what_the_tls_pass_grants(
    user: str, rules: list[str]
) -> None:
    lines = documented(user)
    assert lines, f"no `ACL SETUSER {user}` line in docs/{' or docs/'.join(PLACES)}"
    for line in lines:
        assert line == setuser(user, rules)
