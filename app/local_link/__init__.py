"""The local user's link, Jupyter's way: a key made at every start, printed, kept in DATA_DIR/local-link (mode 600),
opened in a browser when there is a display. `python -m app.local_link` (make link) prints it again; its
`open URL` is the opener, a process of its own.

Anything on this machine (a reverse proxy, a tunnel) reaches loopback: the chat of a machine without users is the
local user's only with the key (app/web/local_key.py).
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from app.config import Settings
from app.history.accounts import Login

# The app's own variable that hands the key from `python -m app` to Chainlit's process.
KEY_VARIABLE = "CHAT_LOCAL_KEY"
LINK_FILE = "local-link"


def hand_out(settings: Settings, login: Login) -> str:
    """With the local user: a fresh key for Chainlit's process, its link kept and opened. The line to print."""
    if login is not Login.LOCAL:
        forget(settings.data_dir)
        return f"Chat UI: http://localhost:{settings.chat_port} (login: {login})"
    key = secrets.token_urlsafe(32)
    os.environ[KEY_VARIABLE] = key
    url = link(settings.chat_port, key)
    keep(settings.data_dir, url)
    open_later(settings, url)
    return f"Chat UI: {url} (the local user's: whoever opens this link is you here; `make link` prints it again)"


def link(port: int, key: str) -> str:
    """The link that makes its browser the local user's."""
    return f"http://localhost:{port}/?key={key}"


def keep(data_dir: Path, url: str) -> None:
    """Write the link where `make link` finds it, readable by this account only."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / LINK_FILE
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(url + "\n")
    path.chmod(0o600)  # a file kept from before may have had other bits


def listening(url: str) -> bool:
    """Whether something listens at the link's port on loopback."""
    try:
        with socket.create_connection(("127.0.0.1", urlsplit(url).port or 80), timeout=1):
            return True
    except OSError:
        return False


def forget(data_dir: Path) -> None:
    """No link: the chat runs with logins (or not at all)."""
    (data_dir / LINK_FILE).unlink(missing_ok=True)


def running_link(data_dir: Path) -> str | None:
    """The link of the chat running now (None: none is, or it was not started by `make chat` / `make run`)."""
    path = data_dir / LINK_FILE
    if not path.exists():
        return None
    url = path.read_text().strip()
    return url if url and listening(url) else None


def has_display() -> bool:
    """Whether a graphical browser can be shown: macOS, Windows, or an X11 or Wayland session."""
    return sys.platform in ("darwin", "win32") or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def open_later(settings: Settings, url: str) -> None:
    """Open the link in a browser once the chat listens, in a process of its own (the app execs Chainlit)."""
    if settings.open_browser and has_display():
        subprocess.Popen([sys.executable, "-m", "app.local_link", "open", url], start_new_session=True)
