"""A real throwaway nginx balancer for tests (Debian's nginx) that spreads sessions over replicas, sticky."""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
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

NGINX = Path("/usr/sbin/nginx")

# The top of every throwaway nginx's configuration: one worker, the pid file and logs of its own.
NGINX_MAIN = """\
worker_processes 1;
{user}
pid {folder}/nginx.pid;
error_log {error_log} notice;

events {{
    worker_connections 1024;
}}
"""

# Inside `http`: Debian's compiled-in temporary folders are root's, under /var/lib/nginx.
TEMP_PATHS = """\
    # Debian's compiled-in temporary folders are root's, under /var/lib/nginx.
    client_body_temp_path {folder}/client_body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
"""

NGINX_CONF = (
    NGINX_MAIN
    + """\

http {{
    log_format balancer '$remote_addr "$request" $status -> $upstream_addr ($upstream_status) $request_time s';
    access_log {access_log} balancer;
{temp_paths}
    # Chainlit's session cookie; nginx variable names stop at '-', so $cookie_X-Chainlit-Session-id would
    # read as $cookie_X followed by text: the cookie is taken from the Cookie header instead.
    map $http_cookie $sticky_key {{
        "~(?:^|;)\\s*X-Chainlit-Session-id=(?<chainlit_session>[^;\\s]+)" $chainlit_session;
        default $remote_addr;
    }}

    map $http_upgrade $connection_upgrade {{
        default upgrade;
        "" close;
    }}

    upstream replicas {{
        hash $sticky_key consistent;
{servers}
    }}

    server {{
        listen 127.0.0.1:{port};

        location = /.balancer-ready {{
            return 204;
        }}

        location / {{
            proxy_pass http://replicas;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            # $http_host, not $host: the port stays, so the app's Host and Origin checks see the balancer.
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            # Streamed answers and websockets pass through at once and may stay quiet for long.
            proxy_buffering off;
            proxy_read_timeout 1h;
            proxy_send_timeout 1h;
            # A stopped replica refuses at once; the request goes on to the other one.
            proxy_connect_timeout 2s;
            proxy_next_upstream error timeout;
            add_header X-Upstream $upstream_addr always;
        }}
    }}
}}
"""
)


def user_line() -> str:
    """nginx's `user` line: empty unless we are root, whose nginx would run its workers as a missing group."""
    if os.geteuid() != 0:
        return ""
    # Root's nginx drops its workers to `nobody` with a group named `nobody`, which Debian lacks.
    nobody = pwd.getpwnam("nobody")
    return f"user nobody {grp.getgrgid(nobody.pw_gid).gr_name};"


def nginx_folder(name: str) -> Path:
    """A fresh folder for an nginx's configuration, pid file and temporary files."""
    if not NGINX.exists():
        raise FileNotFoundError(f"no {NGINX}: {INSTALL_HINT}")
    folder = Path(tempfile.mkdtemp(prefix=f"nginx-{name}-"))
    folder.chmod(0o755)  # root's workers (nobody) use the temporary folders inside
    return folder


def launch_nginx(
    running: Process, folder: Path, config: str, log_path: Path, error_log_path: Path
) -> subprocess.Popen[bytes]:
    """Write folder/nginx.conf and start nginx in the foreground (a restart appends to its log)."""
    LOGS.mkdir(parents=True, exist_ok=True)
    conf = folder / "nginx.conf"
    conf.write_text(config)
    # -e: nginx opens its compiled-in /var/log/nginx/error.log before it reads the configuration.
    argv = [str(NGINX), "-p", str(folder), "-c", str(conf), "-e", str(error_log_path)]
    restart = running.starts > 0
    return running.begin([*argv, "-g", "daemon off;"], hermetic_environment(), log_path, restart, None)


def wait_nginx(process: subprocess.Popen[bytes], port: int, path: str, timeout: float, error_log_path: Path) -> None:
    """Poll a location nginx answers itself with 204, so no upstream is touched (a failure would mark it down)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"nginx exited with {process.returncode}; see {error_log_path}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as reply:
                if reply.status == 204:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)
    raise TimeoutError(f"nginx on port {port} did not answer within {timeout} s")


class NginxLogs:
    """Where one of the tests' nginx servers logs: its output, its errors, its requests, named after it."""

    name: str

    @property
    def log_path(self) -> Path:
        return LOGS / f"nginx-{self.name}.log"

    @property
    def error_log_path(self) -> Path:
        return LOGS / f"nginx-{self.name}-error.log"

    @property
    def access_log_path(self) -> Path:
        return LOGS / f"nginx-{self.name}-access.log"

    def placed(self, folder: Path) -> dict[str, object]:
        """What every configuration of the tests' nginx fills in: the user, its folder, logs and temporary paths."""
        return {
            "user": user_line(),
            "folder": folder,
            "error_log": self.error_log_path,
            "access_log": self.access_log_path,
            "temp_paths": TEMP_PATHS.format(folder=folder),
        }


@dataclass
class NginxBalancer(NginxLogs):
    """Debian's nginx on 127.0.0.1, in the foreground, spreading sessions over replicas on 127.0.0.1."""

    backends: list[int]  # the replicas' ports
    name: str = "balancer"
    fail_timeout: int = 10  # seconds a replica that refused a connection gets no new requests
    port: int = field(default_factory=free_port)
    folder: Path | None = None  # configuration, pid file and nginx's temporary files
    running: Process = field(default_factory=Process)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self.running.process

    def config(self, folder: Path) -> str:
        """nginx.conf for these replicas."""
        # A replica that refused a connection is skipped for a while, so new requests go straight to the others.
        servers = "\n".join(
            f"        server 127.0.0.1:{port} max_fails=1 fail_timeout={self.fail_timeout}s;" for port in self.backends
        )
        return NGINX_CONF.format(**self.placed(folder), servers=servers, port=self.port)

    def start(self, timeout: float = 30) -> None:
        """Write the configuration, start nginx and wait until it answers."""
        register(self)
        try:
            if self.folder is None:
                self.folder = nginx_folder(self.name)
            launch_nginx(self.running, self.folder, self.config(self.folder), self.log_path, self.error_log_path)
            self.wait_ready(START_TIMEOUT or timeout)
        except BaseException:  # a start that fails or is interrupted leaves nothing running, and no folder
            self.stop()
            raise

    def wait_ready(self, timeout: float) -> None:
        """Poll nginx's own readiness location, which touches no replica (a failure would mark it down)."""
        assert self.process is not None
        wait_nginx(self.process, self.port, "/.balancer-ready", timeout, self.error_log_path)

    def stop(self) -> None:
        """Stop nginx (SIGTERM: fast shutdown) and remove its folder."""
        self.running.end(signal.SIGTERM)
        unregister(self)
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
