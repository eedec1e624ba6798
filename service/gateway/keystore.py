"""Where the gateway's token keys live when the environment names none: a keys file in the
state directory, the same for every command a user runs, wherever they run it (issue 31).

The state directory is `TERMINUS_STATE_DIR`, else `$XDG_STATE_HOME/terminus`, else
`~/.local/state/terminus` (the XDG base directory specification's place for state that outlives
a restart but is not worth a backup). Never the working directory: `terminus token` run from
another directory once made a second secret there and minted tokens the gateway refused. The
file holds `id:secret` lines, as `TERMINUS_TOKEN_KEYS_FILE` does, so a key can be rotated by
editing it. A command that finds no file makes one, and says so on stderr with its path: the
only process that writes it is the one that announces it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from terminus.service import TerminusError

STATE_DIR_VAR: Final = "TERMINUS_STATE_DIR"
XDG_STATE_VAR: Final = "XDG_STATE_HOME"
KEYS_FILE_NAME: Final = "token-keys"
DEFAULT_KEY_ID: Final = "default"


class StateDirError(TerminusError):
    """No state directory can be named; the message says which variable to set."""


def state_dir(env: Mapping[str, str]) -> Path:
    """The state directory `env` names: an absolute path, whatever the working directory."""
    given = env.get(STATE_DIR_VAR)
    if given:
        if not Path(given).is_absolute():
            raise StateDirError(
                f"{STATE_DIR_VAR}={given!r} is relative: it would move with the working directory"
            )
        return Path(given)
    xdg = env.get(XDG_STATE_VAR)
    if xdg and Path(xdg).is_absolute():  # the specification says to ignore a relative one
        return Path(xdg) / "terminus"
    home = env.get("HOME")
    if not home or not Path(home).is_absolute():
        raise StateDirError(f"no HOME to keep the token keys under: set {STATE_DIR_VAR}")
    return Path(home) / ".local" / "state" / "terminus"


def keys_file(env: Mapping[str, str]) -> Path:
    """The keys file in the state directory (it may not exist yet)."""
    return state_dir(env) / KEYS_FILE_NAME


def ensure_keys_file(path: Path, announce: Callable[[str], None]) -> None:
    """Make `path` with one new random key unless it exists; the process that makes it, and no
    other, calls `announce` with a line that names it."""
    if path.exists():
        return
    if _create(path):
        announce(
            f"terminus: created a token key in {path} (key id {DEFAULT_KEY_ID!r}); every "
            f"terminus command run as this user reads it (set {STATE_DIR_VAR} to keep it "
            "elsewhere, or TERMINUS_TOKEN_SECRETS to give the keys yourself)"
        )


def _create(path: Path) -> bool:
    """Write a new key to `path` unless another process did first; whether this one did. The
    key is written whole to a file of its own and then linked into place, so no process ever
    reads `path` half written (with O_EXCL on `path` itself, a process that lost the race read
    an empty key and accepted tokens signed with it)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(f"{DEFAULT_KEY_ID}:{secrets.token_urlsafe(32)}\n")
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):  # another process linked its own first
            os.link(staging, path)
            return True
        return False
    finally:
        staging.unlink(missing_ok=True)
