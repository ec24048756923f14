"""A real llama.cpp server for tests: the tiny model as GGUF, started with `python -m serving` (ENGINE=llama.cpp)."""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.servers import LOGS, ServedModel


@dataclass
class LlamaServer(ServedModel):
    """llama-server with the tiny ERNIE-4.5 model converted to GGUF by the project's own serving code."""

    slots: int = 2

    @property
    def log_path(self) -> Path:
        return LOGS / f"llama-{self.name}.log"

    def start(self, timeout: float = 300) -> None:
        """Start the server (converting the model first if needed) and wait until /v1/models answers."""
        self.serve(
            self.log_path,
            timeout,
            None,
            ENGINE="llama.cpp",
            MAX_NUM_SEQS=str(self.slots),
            # One thread: the other core is the app's, the browser's and pytest's.
            VLLM_EXTRA_ARGS="--threads 1 --threads-batch 1",
        )

    def last_task(self) -> dict[str, Any]:
        """The newest request as llama-server's /slots shows it: its id, prompt tokens (its own count) and params."""
        slots = [slot for slot in self.get("/slots") if "id_task" in slot]
        return max(slots, key=lambda slot: slot["id_task"]) if slots else {"id_task": -1}

    def prompt_tokens(self, messages: list[dict[str, str]]) -> int:
        """The prompt tokens llama-server reports (its usage figures) for a chat completion of these messages."""
        body = {"model": "ernie-tiny", "messages": messages, "max_tokens": 1}
        request = urllib.request.Request(
            self.base_url + "/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.api_key}"},
        )
        with urllib.request.urlopen(request, timeout=30) as reply:
            return int(json.loads(reply.read())["usage"]["prompt_tokens"])

    def get(self, path: str) -> Any:
        """A GET of one of llama-server's own endpoints."""
        request = urllib.request.Request(self.root + path, headers={"Authorization": f"Bearer {self.api_key}"})
        with urllib.request.urlopen(request, timeout=10) as reply:
            return json.loads(reply.read())
