"""`make run`: start vLLM, wait until it serves a model, start the chat UI; Ctrl-C stops both."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

from app.config import get_settings


def wait_for_models(url: str, api_key: str, server: subprocess.Popen[bytes], timeout: float) -> bool:
    """Poll /v1/models until it answers 200, the server exits, or time runs out."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                if response.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1)
    return False


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate a process group, then kill it if it lingers."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)


def main() -> int:
    settings = get_settings()
    models_url = settings.vllm_base_url.rstrip("/") + "/models"
    server = subprocess.Popen([sys.executable, "-m", "serving"], start_new_session=True)
    processes = [server]
    try:
        print(f"waiting for vLLM at {models_url} ...", flush=True)
        if not wait_for_models(models_url, settings.api_key.get_secret_value(), server, timeout=1800):
            print("vLLM did not start; see its output above.", file=sys.stderr)
            return 1
        chat = subprocess.Popen([sys.executable, "-m", "app"], start_new_session=True)
        processes.append(chat)
        print("Ctrl-C stops the chat UI and vLLM.", flush=True)
        while all(p.poll() is None for p in processes):
            time.sleep(0.5)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        for process in reversed(processes):
            stop(process)


if __name__ == "__main__":
    sys.exit(main())
