"""Whether the chat UI can listen on its address, checked before anything starts and said as what to change."""

from __future__ import annotations

import errno
import socket


def unavailable(host: str, port: int) -> str | None:
    """Why the chat UI could not listen on host:port now (None: it could), naming the setting to change.

    Checked before the local user's link is handed out (a second `make chat` on a port in use would replace the link
    of the one running there) and before `make run` starts vLLM; uvicorn's own failure comes after Chainlit said the
    app is available, and its process then exits with 0.
    """
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror:
        return f"CHAT_HOST={host}: no address of that name"
    for family, kind, protocol, _, address in addresses:
        with socket.socket(family, kind, protocol) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no use
            try:
                probe.bind(address)
            except OSError as error:
                return reason(host, port, error)
    return None


def reason(host: str, port: int, error: OSError) -> str:
    """A bind's failure as the setting to change."""
    if error.errno == errno.EADDRINUSE:
        return f"CHAT_PORT={port}: {host}:{port} is in use (the chat UI already running?); choose another port"
    if error.errno == errno.EACCES:
        return f"CHAT_PORT={port}: only root may listen on ports below 1024; choose a higher one"
    if error.errno == errno.EADDRNOTAVAIL:
        return f"CHAT_HOST={host}: not an address of this machine"
    return f"CHAT_HOST={host}, CHAT_PORT={port}: cannot listen there: {error.strerror or error}"
