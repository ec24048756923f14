"""A real OpenID Connect provider for tests: panva's oidc-provider 8.8.1 under Node, on 127.0.0.1.

tests/support/oidc/provider.mjs configures it; `make install-test-oidc` installs it (npm ci). One client,
code flow, client_secret_post, no PKCE; scopes openid, email (email, email_verified), profile (name,
preferred_username) and groups (groups); userinfo answers the scopes' claims for the access token.

A browser signs in through its built-in development pages (devInteractions), both at
GET {issuer}/interaction/<uid>, each one form that POSTs back to that same URL:
  login:   <h1>Sign-in</h1>; input[name="prompt"] hidden "login"; input[name="login"] (type text, required):
           the account id, a key of `users`; input[name="password"] (type password, required by the HTML
           but never checked: fill in anything); button[type="submit"] "Sign-in". An unknown account id
           brings the login page back.
  consent: <h1>Authorize</h1> listing the scopes and claims asked for; input[name="prompt"] hidden "consent";
           button[type="submit"] "Continue". Then the provider redirects to redirect_uri?code=...&state=...&iss=...
  Both pages link "[ Cancel ]" to /interaction/<uid>/abort, which sends error=access_denied to redirect_uri.
  The provider keeps its session (cookie _session on 127.0.0.1, which the app shares: cookies ignore ports)
  and the grant: the same browser context later skips both pages.
RP-initiated logout, GET {end_session_endpoint}?client_id=...&post_logout_redirect_uri=<app origin or origin/
or origin/login>: "Do you want to sign-out from 127.0.0.1:<port>?"; form#op.logoutForm (hidden xsrf),
button[name="logout"][value="yes"] "Yes, sign me out", and a second button "No, stay signed in".
Every page @imports a Google font: a browser without network should abort requests off loopback.
"""

from __future__ import annotations

import json
import secrets
import shutil
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.servers import LOGS, Process, free_port, hermetic_environment, register, unregister

OIDC_DIR = Path(__file__).resolve().parent / "oidc"
OIDC_INSTALL_HINT = "run `make install-test-oidc` (npm ci of tests/support/oidc: oidc-provider 8.8.1)"
DISCOVERY = "/.well-known/openid-configuration"
SCOPES = "openid email profile groups"
# Chainlit names the generic provider's routes after OAUTH_GENERIC_NAME: <app>/auth/oauth/generic/callback.
CHAINLIT_PROVIDER = "generic"


def chainlit_callback(app_url: str) -> str:
    """The redirect URI Chainlit's generic provider sends for an app served at app_url (its CHAINLIT_URL)."""
    return f"{app_url.rstrip('/')}/auth/oauth/{CHAINLIT_PROVIDER}/callback"


@dataclass
class OidcProvider:
    """oidc-provider on 127.0.0.1 with one client and these accounts (account id -> claims)."""

    users: dict[str, dict[str, Any]]
    client_id: str = "chat"
    client_secret: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    redirect_uri: str = ""  # start()'s default: lets running() start it with no arguments
    name: str = "oidc"
    port: int = field(default_factory=free_port)
    discovery: dict[str, Any] = field(default_factory=dict)  # the discovery document, once started
    running: Process = field(default_factory=Process)

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return LOGS / f"oidc-{self.name}.log"

    def start(self, redirect_uri: str = "", timeout: float = 30) -> None:
        """Start (or restart: sessions, grants and codes live in memory and are lost); read discovery."""
        register(self)
        try:
            self.redirect_uri = redirect_uri or self.redirect_uri
            if not self.redirect_uri:
                raise ValueError("OidcProvider.start needs a redirect_uri (see chainlit_callback)")
            if not (OIDC_DIR / "node_modules" / "oidc-provider").is_dir():
                raise FileNotFoundError(f"no {OIDC_DIR}/node_modules/oidc-provider: {OIDC_INSTALL_HINT}")
            node = shutil.which("node")
            if node is None:
                raise FileNotFoundError(f"no node on PATH: {OIDC_INSTALL_HINT}")
            env = hermetic_environment(
                OIDC_PORT=str(self.port),
                OIDC_CLIENT_ID=self.client_id,
                OIDC_CLIENT_SECRET=self.client_secret,
                OIDC_REDIRECT_URIS=self.redirect_uri,
                OIDC_USERS=json.dumps(self.users),
            )
            restart = self.running.starts > 0
            self.running.begin([node, str(OIDC_DIR / "provider.mjs")], env, self.log_path, restart, None)
            self.running.wait_ready(self.issuer + DISCOVERY, timeout, {})
            with urllib.request.urlopen(self.issuer + DISCOVERY, timeout=5) as reply:
                self.discovery = json.loads(reply.read())
        except BaseException:  # a start that fails or is interrupted leaves nothing running
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the provider."""
        self.running.end()
        unregister(self)

    def chainlit_env(self) -> dict[str, str]:
        """What Chainlit 2.12's generic OAuth provider reads (the app still needs CHAINLIT_AUTH_SECRET)."""
        if not self.discovery:
            raise RuntimeError("start the provider first: the URLs come from its discovery document")
        return {
            "OAUTH_GENERIC_CLIENT_ID": self.client_id,
            "OAUTH_GENERIC_CLIENT_SECRET": self.client_secret,
            "OAUTH_GENERIC_AUTH_URL": self.discovery["authorization_endpoint"],
            "OAUTH_GENERIC_TOKEN_URL": self.discovery["token_endpoint"],
            "OAUTH_GENERIC_USER_INFO_URL": self.discovery["userinfo_endpoint"],
            "OAUTH_GENERIC_SCOPES": SCOPES,
            "OAUTH_GENERIC_NAME": CHAINLIT_PROVIDER,
            # The userinfo claim that becomes the Chainlit user's identifier (Chainlit's default too).
            "OAUTH_GENERIC_USER_IDENTIFIER": "email",
        }
