"""A real throwaway PostgreSQL cluster for tests, run as Debian installed it."""

from __future__ import annotations

import glob
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.servers import (
    INSTALL_HINT,
    LOGS,
    START_TIMEOUT,
    Process,
    free_port,
    hermetic_environment,
    register,
    unregister,
)

# Only these names are ever spliced into SQL, unquoted, as identifiers.
IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def postgres_bin() -> Path:
    """The bin folder of the newest PostgreSQL that Debian installed."""
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    if not found:
        raise FileNotFoundError(f"no /usr/lib/postgresql/*/bin/initdb: {INSTALL_HINT}")
    newest = max(found, key=lambda path: [int(part) for part in re.findall(r"\d+", Path(path).parts[-3])])
    return Path(newest).parent


def service_user() -> str | None:
    """The account to run a server as: `postgres` when we are root (initdb and postgres refuse root), else us."""
    return "postgres" if os.geteuid() == 0 else None


def as_user(user: str | None) -> list[str]:
    """The argv prefix that runs a command as user; setpriv execs, so the server stays our direct child."""
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--"] if user else []


def client_environment() -> dict[str, str]:
    """hermetic_environment without libpq's PG* variables, which would redirect or reconfigure psql."""
    return {name: value for name, value in hermetic_environment().items() if not name.startswith("PG")}


def children(pid: int) -> list[int]:
    """The live direct children of a process."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit():
                state, parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
                if int(parent) == pid and state != "Z":
                    found.append(int(entry.name))
        except OSError:
            pass
    return found


@dataclass
class PostgresServer:
    """A throwaway PostgreSQL cluster on 127.0.0.1, in a temporary folder, run in the foreground."""

    name: str = "postgres"
    port: int = field(default_factory=free_port)
    user: str = "chat"
    password: str = field(default_factory=lambda: secrets.token_hex(12))
    database: str = "chat"
    folder: Path | None = None  # the cluster's temporary folder: data/ and the unix sockets
    paused: bool = False
    running: Process = field(default_factory=Process)

    @property
    def url(self) -> str:
        """The SQLAlchemy-style URL of the test database, as the test user with its password."""
        return self.url_for(self.database)

    def url_for(self, database: str) -> str:
        """The URL of another database of this cluster."""
        return f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/{database}"

    @property
    def log_path(self) -> Path:
        return LOGS / f"postgres-{self.name}.log"

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self.running.process

    def start(self, timeout: float = 60) -> None:
        """Create the cluster, its user and database on first start; start the server and wait until it serves."""
        fresh = self.folder is None
        register(self)
        try:
            bin_dir = postgres_bin()
            if self.folder is None:
                self.folder = self.make_folder()
                self.initdb(bin_dir)
            settings = {
                "listen_addresses": "127.0.0.1",
                "port": str(self.port),
                "unix_socket_directories": str(self.folder),  # not /var/run/postgresql, which may not be ours
                # A throwaway cluster needs no durability, and tests want it fast.
                "fsync": "off",
                "synchronous_commit": "off",
                "full_page_writes": "off",
            }
            argv = [*as_user(service_user()), str(bin_dir / "postgres"), "-D", str(self.folder / "data")]
            for setting, value in settings.items():
                argv += ["-c", f"{setting}={value}"]
            self.running.begin(argv, client_environment(), self.log_path, not fresh, None)
            self.paused = False
            self.wait_ready(bin_dir, START_TIMEOUT or timeout)
            if fresh:
                self.psql(
                    f"CREATE ROLE {self.checked(self.user)} LOGIN CREATEDB PASSWORD '{self.password}'",
                    f"CREATE DATABASE {self.checked(self.database)} OWNER {self.checked(self.user)}",
                )
        except BaseException:  # a start that fails or is interrupted leaves nothing running, and no folder
            self.stop()
            raise

    def make_folder(self) -> Path:
        """A new temporary folder owned by the account the server runs as."""
        user = service_user()
        # As root, /tmp rather than $TMPDIR: the postgres account must reach the folder, and a unix
        # socket path must stay under 108 bytes.
        folder = Path(tempfile.mkdtemp(prefix=f"pg-{self.name}-", dir="/tmp" if user else None))
        if user:
            entry = pwd.getpwnam(user)
            os.chown(folder, entry.pw_uid, entry.pw_gid)
        return folder

    def initdb(self, bin_dir: Path) -> None:
        """A new cluster in folder/data: the superuser `postgres` trusted on the unix socket, passwords over TCP."""
        assert self.folder is not None
        argv = [
            *as_user(service_user()),
            str(bin_dir / "initdb"),
            "--pgdata",
            str(self.folder / "data"),
            "--username=postgres",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--encoding=UTF8",
            "--no-locale",
            "--no-sync",
            "--no-instructions",
        ]
        done = subprocess.run(argv, cwd=self.folder, env=client_environment(), capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed ({done.returncode}):\n{done.stdout}{done.stderr}")

    def wait_ready(self, bin_dir: Path, timeout: float) -> None:
        """Poll with pg_isready over TCP until the server accepts connections; fail early if it died."""
        assert self.process is not None
        deadline = time.monotonic() + timeout
        argv = [str(bin_dir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port), "-t", "2"]
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.process.returncode}; see {self.log_path}")
            if subprocess.run(argv, env=client_environment()).returncode == 0:
                return
            time.sleep(0.1)
        raise TimeoutError(f"postgres on port {self.port} did not accept connections within {timeout} s")

    @staticmethod
    def checked(identifier: str) -> str:
        """The identifier, if it is a plain lower-case SQL name (nothing to quote or inject)."""
        if not IDENTIFIER.fullmatch(identifier):
            raise ValueError(f"not a plain SQL name: {identifier!r}")
        return identifier

    def psql(self, *statements: str, database: str = "postgres") -> str:
        """Run statements one by one as the superuser over the cluster's unix socket; psql's unaligned output."""
        assert self.folder is not None
        argv = [str(postgres_bin() / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"]
        argv += ["-h", str(self.folder), "-p", str(self.port), "-U", "postgres", "-d", database]
        for statement in statements:  # one -c each: CREATE DATABASE cannot share a transaction
            argv += ["-c", statement]
        done = subprocess.run(argv, env=client_environment(), capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"psql failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def new_database(self, name: str) -> str:
        """Create another empty database, owned by the test user; its URL."""
        self.psql(f"CREATE DATABASE {self.checked(name)} OWNER {self.checked(self.user)}")
        return self.url_for(name)

    def server_processes(self) -> list[int]:
        """The postmaster and its children (each backend runs in a session of its own, so no group holds them)."""
        if self.process is None or self.process.poll() is not None:
            return []
        return [self.process.pid, *children(self.process.pid)]

    def pause(self) -> None:
        """Freeze every server process: connections hang (no refusal) until resume(), as with a stuck database."""
        if self.process is None or self.process.poll() is not None:
            raise RuntimeError("postgres is not running")
        # The postmaster first, so that it forks no child that would escape the freeze.
        os.kill(self.process.pid, signal.SIGSTOP)
        for pid in children(self.process.pid):
            os.kill(pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """Thaw what pause() froze."""
        for pid in reversed(self.server_processes()):
            os.kill(pid, signal.SIGCONT)
        self.paused = False

    def stop(self, keep_data: bool = False) -> None:
        """Fast shutdown (SIGINT); keep_data=True keeps the folder so that start() brings the same cluster back."""
        if self.paused:
            self.resume()
        self.running.end(signal.SIGINT)
        if not keep_data:
            unregister(self)
            if self.folder is not None:
                shutil.rmtree(self.folder, ignore_errors=True)
                self.folder = None
