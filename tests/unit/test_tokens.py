"""Access tokens: what a token grants, and every way it grants nothing (DESIGN section 7)."""

from __future__ import annotations

import contextlib
import multiprocessing
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.tokens import Grant, TokenError, local_secret, mint, verify

SECRET = b"s" * 32
NOW = 1_800_000_000


@given(st.text(min_size=1, max_size=200))
def test_a_session_token_grants_exactly_its_session(session: str) -> None:
    token = mint(SECRET, session, NOW + 60)
    assert verify(SECRET, token, NOW) == Grant(session, NOW + 60)
    assert not verify(SECRET, token, NOW).admin


def test_an_admin_token_grants_the_operator_role() -> None:
    grant = verify(SECRET, mint(SECRET, None, NOW + 60), NOW)
    assert grant.admin
    assert grant.session is None


def test_expiry_is_exclusive() -> None:
    token = mint(SECRET, "s-1", NOW + 60)
    verify(SECRET, token, NOW + 59.999)
    with pytest.raises(TokenError, match="expired"):
        verify(SECRET, token, NOW + 60)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda t: t.replace("v1.", "v2.", 1),
        lambda t: t.rpartition(".")[0],
        lambda t: t + "x",
        lambda t: t.replace(str(NOW + 60), str(NOW + 6000)),  # a longer life, same signature
        lambda t: "v1.admin." + t.split(".", 2)[2],  # another scope, same signature
        lambda t: "",
        lambda t: "....",
    ],
)
def test_a_changed_token_is_refused(tamper: object) -> None:
    token = mint(SECRET, "s-1", NOW + 60)
    changed = tamper(token)  # type: ignore[operator]
    with pytest.raises(TokenError):
        verify(SECRET, changed, NOW)


def test_another_secret_refuses_the_token() -> None:
    with pytest.raises(TokenError, match="signature"):
        verify(b"t" * 32, mint(SECRET, "s-1", NOW + 60), NOW)


def test_the_local_secret_is_made_once_private_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "var" / "token-secret"
    first = local_secret({}, path)
    assert len(first) >= 32
    assert path.stat().st_mode & 0o777 == 0o600
    assert local_secret({}, path) == first
    assert local_secret({"TERMINUS_TOKEN_SECRET": "x" * 20}, path) == b"x" * 20
    with pytest.raises(TokenError, match="at least"):
        local_secret({"TERMINUS_TOKEN_SECRET": "short"}, path)


@given(st.text(max_size=120))
def test_any_string_is_refused_or_granted_never_raised_otherwise(text: str) -> None:
    token = mint(SECRET, "s-1", NOW + 60)
    for candidate in (text, token[:-3] + text, token.rpartition(".")[0] + "." + text):
        with contextlib.suppress(TokenError):
            verify(SECRET, candidate, NOW)


def test_a_non_ascii_signature_is_malformed_not_a_crash() -> None:
    token = mint(SECRET, "s-1", NOW + 60)
    with pytest.raises(TokenError, match="malformed"):
        verify(SECRET, token[:-1] + "é", NOW)


def test_a_secret_file_shorter_than_the_minimum_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "token-secret"
    path.write_text("")
    with pytest.raises(TokenError, match="at least"):
        local_secret({}, path)


def _start(path: str) -> bytes:
    return local_secret({}, Path(path))


def test_concurrent_first_starts_all_read_the_one_whole_secret(tmp_path: Path) -> None:
    """200 processes race to create the secret: every one reads the same full key (187 of 200 read
    an empty one when the file was created in place)."""
    path = tmp_path / "var" / "token-secret"
    with multiprocessing.get_context("fork").Pool(16) as pool:
        secrets = pool.map(_start, [str(path)] * 200)
    assert len(set(secrets)) == 1
    assert len(secrets[0]) >= 32
    assert sorted(p.name for p in path.parent.iterdir()) == ["token-secret"]
