"""Real servers for tests: vLLM (through the project's serving module) and the Chainlit app."""

from __future__ import annotations

import ast
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "test-results" / "logs"


def pin(cpus: set[int] | None):
    """A preexec_fn that restricts the child to these CPUs (None: no restriction)."""
    return (lambda: os.sched_setaffinity(0, cpus)) if cpus else None


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(url: str, process: subprocess.Popen[bytes], timeout: float, headers: dict[str, str]) -> None:
    """Poll url until it answers 200; fail early if the process died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=2) as reply:
                if reply.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer within {timeout} s")


def stop_group(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """Signal the process group and wait for it."""
    if process.poll() is None:
        os.killpg(process.pid, sig)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@dataclass
class VllmServer:
    """A vLLM process serving the tiny ERNIE-4.5 model, started with `python -m serving`."""

    name: str
    port: int = field(default_factory=free_port)
    max_model_len: int = 256
    api_key: str = "test-key"
    model: str = ""
    cpus: set[int] | None = None
    process: subprocess.Popen[bytes] | None = None

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.root + "/v1"

    @property
    def log_path(self) -> Path:
        return LOGS / f"vllm-{self.name}.log"

    def start(self, timeout: float = 240) -> None:
        """Start (or restart) the server and wait until /v1/models answers."""
        LOGS.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "MODEL": self.model or os.environ.get("TINY_MODEL", str(ROOT / ".cache/models/ernie-tiny")),
            "SERVED_MODEL_NAME": "ernie-tiny",
            "VLLM_HOST": "127.0.0.1",
            "VLLM_PORT": str(self.port),
            "MAX_MODEL_LEN": str(self.max_model_len),
            "MAX_NUM_SEQS": "64",
            "PROFILE": "dev",
            "API_KEY": self.api_key,
            "VLLM_LOGGING_CONFIG_PATH": str(ROOT / "tests" / "vllm_logging.json"),
            "VLLM_EXTRA_ARGS": "--enable-log-requests --max-log-len 100000",
            # vLLM's OpenMP threads spin: one core for it, the other for the app, the browser and pytest.
            "VLLM_CPU_OMP_THREADS_BIND": ",".join(map(str, sorted(self.cpus))) if self.cpus else "0",
        }
        log = open(self.log_path, "ab" if self.process else "wb")  # a restart appends
        self.process = subprocess.Popen([sys.executable, "-m", "serving"], cwd=ROOT, env=env,
                                        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                        preexec_fn=pin(self.cpus))
        wait_http(self.base_url + "/models", self.process, timeout,
                  {"Authorization": f"Bearer {self.api_key}"})

    def kill(self) -> None:
        """Kill the server at once, as a crash would."""
        if self.process is not None:
            stop_group(self.process, signal.SIGKILL)

    def stop(self) -> None:
        if self.process is not None:
            stop_group(self.process)

    def metric(self, name: str, label: str = "") -> float:
        """One Prometheus gauge or counter of vLLM, summed over the series whose labels contain label."""
        with urllib.request.urlopen(self.root + "/metrics", timeout=5) as reply:
            text = reply.read().decode()
        total = 0.0
        for line in text.splitlines():
            if (line.startswith(name + "{") or line.startswith(name + " ")) and label in line:
                total += float(line.rsplit(" ", 1)[1])
        return total

    def count_tokens(self, prompt: str) -> int:
        """Tokens of an already rendered prompt."""
        body = json.dumps({"model": "ernie-tiny", "prompt": prompt, "add_special_tokens": False}).encode()
        request = urllib.request.Request(self.root + "/tokenize", data=body, headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {self.api_key}"})
        with urllib.request.urlopen(request, timeout=10) as reply:
            return int(json.loads(reply.read())["count"])

    def logged_requests(self) -> list[dict[str, str]]:
        """Requests vLLM logged: their rendered prompt and sampling parameters, oldest first."""
        text = self.log_path.read_text(errors="replace")
        prompts = {m[1]: ast.literal_eval(m[2]) for m in
                   re.finditer(r"Request (\S+) details: prompt: ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")", text)}
        requests = []
        for match in re.finditer(r"Received request (\S+): params: SamplingParams\((.*?)\), lora", text):
            request_id, params = match[1], match[2]
            values = dict(re.findall(r"(\w+)=([^,]+)", params))
            requests.append({"id": request_id, "prompt": prompts.get(request_id, ""), **values})
        return requests


@dataclass
class ChatApp:
    """The Chainlit app, started as `chainlit run app/main.py` against a vLLM server."""

    vllm: VllmServer
    port: int = field(default_factory=free_port)
    extra_env: dict[str, str] = field(default_factory=dict)
    cpus: set[int] | None = None
    reconnect_grace: float = 0.0  # the product's default: a closed tab stops its answer at once
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90) -> None:
        LOGS.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "VLLM_BASE_URL": self.vllm.base_url, "API_KEY": self.vllm.api_key,
               "READINESS_POLL_SECONDS": "0.5",
               "RECONNECT_GRACE_SECONDS": str(self.reconnect_grace), "CHAT_HOST": "127.0.0.1", "CHAT_PORT": str(self.port),
               **self.extra_env}
        log = open(LOGS / f"chainlit-{self.vllm.name}-{self.port}.log", "ab")
        self.process = subprocess.Popen([sys.executable, "-m", "app"], cwd=ROOT, env=env, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=pin(self.cpus))
        wait_http(self.url + "/", self.process, timeout, {})

    def stop(self) -> None:
        if self.process is not None:
            stop_group(self.process)
