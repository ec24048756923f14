"""Single sign-on in front of the app, as oauth2-proxy or Authelia do it: Debian's nginx with auth_request."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit

from tests.support.login_service import COOKIE
from tests.support.nginx import (
    NGINX_MAIN,
    NginxLogs,
    launch_nginx,
    nginx_folder,
    wait_nginx,
)
from tests.support.servers import (
    HERE,
    LOGS,
    START_TIMEOUT,
    Process,
    free_port,
    hermetic_environment,
    register,
    unregister,
)

__all__ = ["COOKIE", "AuthProxy"]

# Header names end up in nginx.conf: nothing but a plain token may get there.
HEADER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*")

AUTH_PROXY_CONF = (
    NGINX_MAIN
    + """\

http {{
    log_format sso '$remote_addr "$request" $status user=$sso_user'
                   ' -> $upstream_addr ($upstream_status) $request_time s';
    access_log {access_log} sso;
{temp_paths}
    map $http_upgrade $connection_upgrade {{
        default upgrade;
        "" close;
    }}

    server {{
        listen 127.0.0.1:{port};
        # Redirects name a path only: the proxy may be reached under another host and port than it listens on.
        absolute_redirect off;

        location = /.proxy-ready {{
            return 204;
        }}

        # The login service's own pages: signing in needs no sign-in.
        location /sso/ {{
            proxy_pass http://{login};
            proxy_set_header Host $http_host;
        }}

        # auth_request's subrequest: the login service sees the cookies and answers 200 (with the user) or 401.
        location = /_auth {{
            internal;
            proxy_pass http://{login}/auth;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header Cookie $http_cookie;
            proxy_set_header X-Original-URI $request_uri;
        }}

        location / {{
            auth_request /_auth;
            auth_request_set $sso_user $upstream_http_x_auth_user;
            auth_request_set $sso_email $upstream_http_x_auth_email;
            auth_request_set $sso_groups $upstream_http_x_auth_groups;
            error_page 401 = @sign_in;

            # A header set here replaces the client's header of that name, so no client can claim a user; one
            # not set here passes through as the client sent it.
{identity_headers}
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            # $http_host, not $host: the port stays, so the app's Host and Origin checks see the proxy.
            proxy_set_header Host $http_host;
            # Chainlit's socket.io upgrades to a websocket.
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_buffering off;
            proxy_read_timeout 1h;
            proxy_send_timeout 1h;
            # The app trusts the identity headers from this address only; a test's own requests come from 127.0.0.1.
            proxy_bind {bind};
            proxy_pass http://{app};
        }}

        location @sign_in {{
            return 302 /sso/login;
        }}
    }}
}}
"""
)


@dataclass
class AuthProxy(NginxLogs):
    """nginx on 127.0.0.1 that signs people in with a tiny login service and passes the user on to the app."""

    app_url: str  # the app's address: http://host:port or host:port
    users: dict[str, str]  # name -> email
    name: str = "sso"
    user_header: str = "X-Forwarded-User"
    # Empty: the proxy does not set that header (as oauth2-proxy's common mapping, or a `location` missing a line).
    email_header: str = "X-Forwarded-Email"
    groups_header: str = "X-Forwarded-Groups"
    groups: dict[str, str] = field(default_factory=dict)  # name -> comma-separated groups, for some users
    bind: str = "127.0.0.2"  # where the app sees the proxy's requests come from: its TRUSTED_PROXIES
    port: int = field(default_factory=free_port)
    login_port: int = field(default_factory=free_port)
    folder: Path | None = None  # nginx's configuration, pid file and temporary files
    nginx: Process = field(default_factory=Process)
    login: Process = field(default_factory=Process)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def login_url(self) -> str:
        return self.url + "/sso/login"

    @property
    def sign_out_url(self) -> str:
        return self.url + "/sso/sign-out"

    def sign_in_url(self, user: str, next_path: str = "/") -> str:
        """The proxy's URL that signs user in (sets the cookie) and redirects to next_path."""
        return f"{self.url}/sso/sign-in?user={quote(user)}&next={quote(next_path)}"

    @property
    def upstream(self) -> str:
        """The app's host:port."""
        netloc = urlsplit(self.app_url if "//" in self.app_url else "//" + self.app_url).netloc
        if not netloc:
            raise ValueError(f"no host:port in app_url {self.app_url!r}")
        return netloc

    @property
    def login_log_path(self) -> Path:
        return LOGS / f"login-{self.name}.log"

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self.nginx.process

    def config(self, folder: Path) -> str:
        """nginx.conf for this app and login service."""
        sets = {self.user_header: "$sso_user", self.email_header: "$sso_email", self.groups_header: "$sso_groups"}
        sets.pop("", None)
        for header in sets:
            if not HEADER_NAME.fullmatch(header):
                raise ValueError(f"not a header name: {header!r}")
        return AUTH_PROXY_CONF.format(
            **self.placed(folder),
            port=self.port,
            login=f"127.0.0.1:{self.login_port}",
            app=self.upstream,
            bind=self.bind,
            identity_headers="\n".join(f"            proxy_set_header {name} {value};" for name, value in sets.items()),
        )

    def start(self, timeout: float = 30) -> None:
        """Start the login service, then nginx, and wait until both answer."""
        register(self)
        try:
            if self.folder is None:
                self.folder = nginx_folder(self.name)
            config = self.config(self.folder)  # a bad header name fails before anything starts
            argv = [sys.executable, str(HERE / "login_service.py"), str(self.login_port)]
            env = hermetic_environment(SSO_USERS=json.dumps(self.users), SSO_GROUPS=json.dumps(self.groups))
            self.login.begin(argv, env, self.login_log_path, self.login.starts > 0, None)
            self.login.wait_ready(f"http://127.0.0.1:{self.login_port}/sso/login", timeout, {})
            process = launch_nginx(self.nginx, self.folder, config, self.log_path, self.error_log_path)
            wait_nginx(process, self.port, "/.proxy-ready", START_TIMEOUT or timeout, self.error_log_path)
        except BaseException:  # a start that fails or is interrupted leaves nothing running, and no folder
            self.stop()
            raise

    def stop(self) -> None:
        """Stop nginx (SIGTERM: fast shutdown) and the login service, and remove nginx's folder."""
        self.nginx.end(signal.SIGTERM)
        self.login.end()
        unregister(self)
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
