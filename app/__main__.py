"""`python -m app`: start the Chainlit UI on the configured host and port."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pydantic import ValidationError

from app.config import explain, get_settings


def main() -> int:
    try:
        settings = get_settings()
    except ValidationError as exc:
        for line in explain(exc):
            print(f"make chat: {line}", file=sys.stderr)
        return 2
    chainlit = Path(sys.executable).with_name("chainlit")
    main_py = Path(__file__).with_name("main.py")
    print(f"Chat UI: http://localhost:{settings.chat_port}", flush=True)
    # Chainlit reads .chainlit/ and chainlit*.md from the working directory: the project root.
    os.chdir(main_py.parent.parent)
    os.execv(
        chainlit,
        [
            str(chainlit),
            "run",
            str(main_py),
            "--headless",
            "--host",
            settings.chat_host,
            "--port",
            str(settings.chat_port),
        ],
    )


if __name__ == "__main__":
    sys.exit(main())
