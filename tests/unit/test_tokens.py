"""Access tokens: what a token grants, and every way it grants nothing (DESIGN section 7)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from terminus.service.gateway.tokens import (
    Grant,
    Keyring,
    TokenError,
    local_keyring,
    mint,
    verify,
)

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
        lambda t: t.replace("v2.", "v1.", 1),  # the legacy form, the same signature
        lambda t: t.replace("v2.", "v3.", 1),
        lambda t: t.rpartition(".")[0],
        lambda t: t + "x",
        lambda t: t.replace(str(NOW + 60), str(NOW + 6000)),  # a longer life, same signature
        lambda t: "v2.default.admin." + t.split(".", 3)[3],  # another scope, same signature
        lambda t: t.replace(".default.", ".other.", 1),  # another key id, same signature
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


def test_the_local_key_is_made_once_private_and_kept(tmp_path: Path) -> None:
    env = {"TERMINUS_STATE_DIR": str(tmp_path / "state")}
    first = local_keyring(env, announce=lambda line: None)
    assert len(first.keys["default"]) >= 32
    path = tmp_path / "state" / "token-keys"
    assert path.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "state").stat().st_mode & 0o777 == 0o700
    assert local_keyring(env).keys == first.keys
    assert local_keyring({**env, "TERMINUS_TOKEN_SECRET": "x" * 20}).keys == {"default": b"x" * 20}
    with pytest.raises(TokenError, match="at least"):
        local_keyring({**env, "TERMINUS_TOKEN_SECRET": "short"})


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


def test_a_key_file_with_a_short_secret_is_refused(tmp_path: Path) -> None:
    (tmp_path / "token-keys").write_text("default:short\n")
    with pytest.raises(TokenError, match="needs 16 bytes"):
        local_keyring({"TERMINUS_STATE_DIR": str(tmp_path)})


def _start(directory: str) -> bytes:
    return local_keyring({"TERMINUS_STATE_DIR": directory}, announce=_quiet).keys["default"]


def _quiet(line: str) -> None:
    pass


def test_concurrent_first_starts_all_read_the_one_whole_key(tmp_path: Path) -> None:
    """200 processes race to create the key: every one reads the same full key (187 of 200 read
    an empty one when the file was created in place)."""
    directory = tmp_path / "state"
    with multiprocessing.get_context("fork").Pool(16) as pool:
        secrets = pool.map(_start, [str(directory)] * 200)
    assert len(set(secrets)) == 1
    assert len(secrets[0]) >= 32
    assert sorted(p.name for p in directory.iterdir()) == ["token-keys"]


OLD, NEW = b"o" * 32, b"n" * 32


def legacy_token(secret: bytes, session: str, expires: int) -> str:
    """A token as `mint` made them before key ids (v1): no key id, the same signature scheme."""
    body = f"v1.s-{base64.urlsafe_b64encode(session.encode()).rstrip(b'=').decode()}.{expires}"
    mac = hmac.new(secret, body.encode(), hashlib.sha256).digest()
    return f"{body}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


def test_a_token_names_its_key_and_verifies_while_that_key_is_accepted() -> None:
    old_token = mint(Keyring({"k1": OLD}), "s-1", NOW + 60)
    assert old_token.startswith("v2.k1.")
    rotated = Keyring({"k2": NEW, "k1": OLD})  # k2 signs from now on, k1 is still accepted
    assert verify(rotated, old_token, NOW) == Grant("s-1", NOW + 60)
    assert mint(rotated, "s-1", NOW + 60).startswith("v2.k2.")
    retired = Keyring({"k2": NEW})
    with pytest.raises(TokenError, match="retired"):
        verify(retired, old_token, NOW)


def test_a_legacy_token_verifies_until_its_secret_leaves_the_ring() -> None:
    token = legacy_token(OLD, "s-1", NOW + 60)
    assert verify(OLD, token, NOW) == Grant("s-1", NOW + 60)  # the single secret, as before
    assert verify(Keyring({"k2": NEW, "default": OLD}), token, NOW).session == "s-1"
    with pytest.raises(TokenError, match="signature"):
        verify(Keyring({"k2": NEW}), token, NOW)


@given(key_id=st.text(max_size=40))
def test_any_key_id_is_refused_or_granted_never_raised_otherwise(key_id: str) -> None:
    token = mint(Keyring({"k1": OLD}), "s-1", NOW + 60)
    forged = token.replace(".k1.", f".{key_id}.", 1)
    try:
        grant = verify(Keyring({"k1": OLD}), forged, NOW)
    except TokenError:
        return
    assert key_id == "k1"
    assert grant.session == "s-1"


def test_keys_come_from_the_environment_or_a_file(tmp_path: Path) -> None:
    ring = local_keyring({"TERMINUS_TOKEN_SECRETS": f"new:{'n' * 20}, old:{'o' * 20}"})
    assert (ring.current, list(ring.keys)) == ("new", ["new", "old"])
    keys = tmp_path / "keys"
    keys.write_text(f"# current first\nnew:{'n' * 20}\n\nold:{'o' * 20}\n")
    assert local_keyring({"TERMINUS_TOKEN_KEYS_FILE": str(keys)}).keys == ring.keys
    single = local_keyring({"TERMINUS_TOKEN_SECRET": "x" * 20})
    assert single.keys == {"default": b"x" * 20}
    assert "x" * 20 not in repr(single)
    assert "n" * 20 not in repr(ring)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("new", "not `id:secret`"),
        (f"new:{'n' * 20},new:{'m' * 20}", "twice"),
        ("new:short", "16 bytes"),
        (f"bad id:{'n' * 20}", "key id"),
    ],
)
def test_a_bad_key_list_is_refused_without_echoing_a_secret(value: str, error: str) -> None:
    with pytest.raises(TokenError, match=error) as refused:
        local_keyring({"TERMINUS_TOKEN_SECRETS": value})
    assert "n" * 20 not in str(refused.value)
    assert "short" not in str(refused.value)


def test_terminus_token_mints_with_the_current_key(tmp_path: Path) -> None:
    env = {**os.environ, "TERMINUS_TOKEN_SECRETS": f"k2:{'n' * 20},k1:{'o' * 20}"}
    env.pop("TERMINUS_TOKEN_SECRET", None)
    done = subprocess.run(
        [sys.executable, "-m", "terminus", "token", "--admin", "--ttl", "60"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    token = done.stdout.strip()
    assert token.startswith("v2.k2.admin.")
    ring = Keyring({"k2": b"n" * 20, "k1": b"o" * 20})
    assert verify(ring, token, time.time()).admin
    with pytest.raises(TokenError, match="retired"):
        verify(Keyring({"k1": b"o" * 20}), token, time.time())


@given(st.text(min_size=1, max_size=200))
def test_a_producer_token_grants_publishing_into_its_session_only(session: str) -> None:
    grant = verify(SECRET, mint(SECRET, session, NOW + 60, producer=True), NOW)
    assert grant == Grant(session, NOW + 60, producer=True)
    assert not grant.admin
    assert not verify(SECRET, mint(SECRET, session, NOW + 60), NOW).producer


def test_a_producer_token_names_its_session() -> None:
    with pytest.raises(TokenError, match="names its session"):
        mint(SECRET, None, NOW + 60, producer=True)


def test_terminus_token_mints_a_producer_token(tmp_path: Path) -> None:
    env = {**os.environ, "TERMINUS_TOKEN_SECRETS": f"k2:{'n' * 20}"}
    done = subprocess.run(
        [sys.executable, "-m", "terminus", "token", "--producer", "s-1", "--ttl", "60"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    grant = verify(Keyring({"k2": b"n" * 20}), done.stdout.strip(), time.time())
    assert (grant.session, grant.producer) == ("s-1", True)
