"""A private PostgreSQL server for the sink tests: Debian's binaries, a cluster in a temporary
directory, a free port, and never the machine's own server.

`initdb` and `postgres` refuse to run as root, so as root they run as the `postgres` user (else
`nobody`) through `runuser`, in a directory of the system's temporary folder that user owns
(pytest's own temporary folders are root's alone, closed to that user). Where the binaries are
absent the tests that want a server skip with one line (`.ci/setup` installs `postgresql`).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Final

from terminus.service.redis.embedded import free_port

BINARIES: Final = "/usr/lib/postgresql/*/bin"
READY_S: Final = 30.0


def binaries() -> Path | None:
    """The newest installed server's bin directory, or None."""
    found = sorted(glob.glob(BINARIES), key=lambda p: int(Path(p).parent.name or 0))
    found = [
        p for p in found if (Path(p) / "initdb").is_file() and (Path(p) / "postgres").is_file()
    ]
    return Path(found[-1]) if found else None


def _runner() -> list[str]:
    if os.geteuid() != 0:
        return []
    for user in ("postgres", "nobody"):
        try:
            pwd.getpwnam(user)
        except KeyError:
            continue
        return ["runuser", "-u", user, "--"]
    raise RuntimeError("as root, PostgreSQL needs a user to run as (postgres or nobody)")


class PrivateServer:
    """A PostgreSQL cluster under `root`, started and stopped (or killed) by the test."""

    def __init__(self) -> None:
        bin_dir = binaries()
        assert bin_dir is not None, "no PostgreSQL binaries"
        self.bin = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="terminus-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._as = _runner()

    @property
    def url(self) -> str:
        return f"postgresql://terminus@127.0.0.1:{self.port}/postgres"

    def url_of(self, database: str) -> str:
        return f"postgresql://terminus@127.0.0.1:{self.port}/{database}"

    def init(self) -> None:
        if self._as:
            user = self._as[2]
            shutil.chown(self.root, user)
            os.chmod(self.root, 0o700)
        options = ["-U", "terminus", "-A", "trust", "-E", "UTF8", "--no-sync"]
        subprocess.run(
            [*self._as, str(self.bin / "initdb"), "-D", str(self.data), *options],
            check=True,
            capture_output=True,
        )

    def start(self) -> None:
        """Start the server and wait until it answers."""
        command = [*self._as, str(self.bin / "postgres"), "-D", str(self.data)]
        command += ["-p", str(self.port), "-k", str(self.root), "-c", "listen_addresses=127.0.0.1"]
        command += ["-c", "fsync=off", "-c", "max_connections=50"]
        with open(self.root / "server.log", "ab") as log:  # the server keeps its own copy
            # A session of its own: a kill reaches the server and every backend at once.
            self.process = subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True)
        self._wait_ready()

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + READY_S
        while True:
            try:
                psycopg.connect(self.url, connect_timeout=1).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline or (
                    self.process and self.process.poll() is not None
                ):
                    log = (self.root / "server.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"PostgreSQL did not start:\n{log}") from None
                time.sleep(0.1)

    def stop(self, kill: bool = False) -> None:
        """A fast shutdown (SIGINT to the postmaster), or SIGKILL to it and every backend: a
        crash, after which the next start recovers from the WAL."""
        process, self.process = self.process, None
        if process is None:
            return
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        if kill:
            doomed = [postmaster, *_children(postmaster)]
            for pid in doomed:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            while any(Path(f"/proc/{pid}").exists() and _alive(pid) for pid in doomed):
                time.sleep(0.05)
        else:
            os.kill(postmaster, signal.SIGINT)
        process.wait(timeout=30)

    def remove(self) -> None:
        """Stop the server if it runs and delete its directory."""
        self.stop(kill=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def create_database(self, name: str) -> str:
        """A new empty database; returns its URL."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url_of(name)


def _children(parent: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == parent:
                found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    """Not gone and not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
