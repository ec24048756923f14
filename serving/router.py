"""`python -m serving.router [--dry-run]`: vLLM's router in front of several vLLM servers, each chat kept on one.

The router (vllm-router, its own environment) spreads chats over VLLM_SERVERS; the app then points VLLM_BASE_URL at
it. The app sends each chat's id in the X-Session-ID header, so consistent hashing sends every turn of a chat to the
server that already holds its prefix in its cache.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
import shlex
import sys
from typing import Literal

from pydantic import Field

from app.config import EnvSettings, dotenv_file, load_or_explain
from serving.errors import ServeError

# How often the router asks each server's /health, in seconds: a server that stops answering leaves the hash ring
# at the next check, and one that answers again joins it at the next.
HEALTH_CHECK_INTERVAL_S = 1
# A request a server failed (a connection refused: it died) opens its circuit at once, so the router's retry of
# that request goes to another server rather than to the same one until the health check notices (a second).
# After this many seconds the server is tried again.
CIRCUIT_OPEN_S = 5


class RouterSettings(EnvSettings):
    """The router's settings from the environment (names are the variables, upper-cased)."""

    vllm_servers: str = Field("", description="The vLLM servers behind the router: URLs, by spaces or commas")
    router_host: str = "127.0.0.1"
    router_port: int = Field(8100, ge=1, le=65535)
    router_policy: Literal["consistent_hash", "cache_aware", "power_of_two", "round_robin", "random"] = Field(
        "consistent_hash", description="consistent_hash: each chat on one server (by the X-Session-ID the app sends)"
    )
    router_metrics_port: int = Field(8109, ge=1, le=65535, description="The router's Prometheus metrics (loopback)")

    @property
    def servers(self) -> list[str]:
        """The servers' URLs, without a trailing /v1 (the router adds the paths itself)."""
        urls = [url.rstrip("/") for url in re.split(r"[\s,]+", self.vllm_servers) if url]
        return [url.removesuffix("/v1") for url in urls]

    @property
    def base_url(self) -> str:
        """What the app's VLLM_BASE_URL is for this router."""
        try:
            address = ipaddress.ip_address(self.router_host.strip("[]"))
        except ValueError:  # a host name
            return f"http://{self.router_host}:{self.router_port}/v1"
        if address.is_unspecified:  # listening on every interface: reached on this machine's loopback
            return f"http://127.0.0.1:{self.router_port}/v1"
        host = address.compressed if address.version == 4 else f"[{address.compressed}]"
        return f"http://{host}:{self.router_port}/v1"


def router_command(settings: RouterSettings, router_venv: str) -> list[str]:
    """The vllm-router command line for these settings; ServeError when there is nothing to route to."""
    servers = settings.servers
    if not servers:
        raise ServeError(
            "VLLM_SERVERS is empty: list the vLLM servers the router spreads chats over, e.g. "
            "VLLM_SERVERS='http://127.0.0.1:8001 http://127.0.0.1:8002' (each started with make serve VLLM_PORT=...)"
        )
    if bad := [url for url in servers if not re.fullmatch(r"https?://[^\s/]+", url)]:
        raise ServeError(f"VLLM_SERVERS: {', '.join(bad)} is not a server's URL (http://host:port)")
    executable = os.path.join(router_venv, "bin", "vllm-router")
    if not os.path.exists(executable):
        raise ServeError(f"{router_venv} has no vllm-router yet: run make install-router")
    return [
        executable,
        *("--host", settings.router_host, "--port", str(settings.router_port)),
        *("--worker-urls", *servers),
        *("--policy", settings.router_policy),
        # Start with the servers that answer; one that is down joins once its /health answers.
        *("--worker-startup-timeout-secs", "1"),
        *("--health-check-interval-secs", str(HEALTH_CHECK_INTERVAL_S)),
        *("--health-failure-threshold", "1", "--health-success-threshold", "1"),
        *("--cb-failure-threshold", "1", "--cb-success-threshold", "1"),
        *("--cb-timeout-duration-secs", str(CIRCUIT_OPEN_S)),
        *("--prometheus-host", "127.0.0.1", "--prometheus-port", str(settings.router_metrics_port)),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    args = parser.parse_args()
    settings = load_or_explain(lambda: RouterSettings(_env_file=dotenv_file()), "make router")
    if settings is None:
        return 2
    try:
        argv = router_command(settings, os.environ.get("ROUTER_VENV", ".venv-router"))
    except ServeError as exc:
        print(f"make router: {exc}", file=sys.stderr)
        return 2
    print(
        f"  - {len(settings.servers)} vLLM servers, policy {settings.router_policy}; the app's VLLM_BASE_URL is "
        f"{settings.base_url}"
    )
    print(shlex.join(argv), flush=True)
    if args.dry_run:
        return 0
    os.execv(argv[0], argv)


if __name__ == "__main__":
    sys.exit(main())
