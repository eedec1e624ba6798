"""Where token keys live when the environment names none (issue 31, item 3): the state
directory, chosen by the environment alone, never the working directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from terminus.service.gateway.keystore import StateDirError, keys_file, state_dir
from terminus.service.gateway.tokens import TokenError, local_keyring


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"TERMINUS_STATE_DIR": "/srv/t", "XDG_STATE_HOME": "/x", "HOME": "/h"}, "/srv/t"),
        ({"XDG_STATE_HOME": "/x", "HOME": "/h"}, "/x/terminus"),
        ({"XDG_STATE_HOME": "relative", "HOME": "/h"}, "/h/.local/state/terminus"),
        ({"HOME": "/h"}, "/h/.local/state/terminus"),
    ],
)
def test_the_state_directory_comes_from_the_environment(env: dict[str, str], expected: str) -> None:
    assert state_dir(env) == Path(expected)
    assert keys_file(env) == Path(expected) / "token-keys"


@pytest.mark.parametrize("env", [{"TERMINUS_STATE_DIR": "var/state", "HOME": "/h"}, {}])
def test_no_state_directory_is_relative_to_the_working_directory(env: dict[str, str]) -> None:
    with pytest.raises(StateDirError, match="TERMINUS_STATE_DIR"):
        state_dir(env)
    with pytest.raises(TokenError, match="TERMINUS_STATE_DIR"):
        local_keyring(env)


def test_the_keys_are_the_same_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"HOME": str(tmp_path / "home")}
    said: list[str] = []
    rings = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        rings.append(local_keyring(env, announce=said.append))
        assert os.listdir(".") == []
    assert rings[0].keys == rings[1].keys
    assert len(said) == 1
    assert str(tmp_path / "home" / ".local" / "state" / "terminus" / "token-keys") in said[0]


def test_a_key_file_the_user_edits_rotates(tmp_path: Path) -> None:
    (tmp_path / "token-keys").write_text(f"# new first\nk2:{'n' * 20}\ndefault:{'o' * 20}\n")
    ring = local_keyring({"TERMINUS_STATE_DIR": str(tmp_path)})
    assert (ring.current, list(ring.keys)) == ("k2", ["k2", "default"])
