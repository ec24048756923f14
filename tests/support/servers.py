"""Real servers for tests: vLLM (through the project's serving module) and the Chainlit app."""

from __future__ import annotations

import ast
import atexit
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from app.config import Settings
from serving.plan import ServeSettings
from serving.router import RouterSettings

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
LOGS = Path(os.environ.get("TEST_LOGS") or ROOT / "test-results" / "logs")
# Seconds a server may take to answer; a test of the clean-up shortens it to make a start fail.
START_TIMEOUT = float(os.environ.get("TEST_SERVER_START_TIMEOUT") or 0)
PROJECT_VARIABLES = frozenset(
    name.upper() for name in (*Settings.model_fields, *ServeSettings.model_fields, *RouterSettings.model_fields)
)
STARTED: list[subprocess.Popen[bytes]] = []
# The key of each running app of the local user (by its origin), read from the `Chat UI: ...?key=` line it printed.
LOCAL_KEYS: dict[str, str] = {}
KEY_LINK = re.compile(r"^Chat UI: http://localhost:\d+/\?key=([\w-]+)", re.MULTILINE)


def hermetic_environment(**settings: str) -> dict[str, str]:
    """The inherited environment without the project's settings and without .env, plus what a test means."""
    inherited = {name: value for name, value in os.environ.items() if name not in PROJECT_VARIABLES}
    return {**inherited, "PYTHON_DOTENV_DISABLED": "1", **settings}


def remember_key(url: str, printed: str) -> None:
    """Keep the key an app at url printed in its `Chat UI:` line (a start with logins prints none: forgotten)."""
    LOCAL_KEYS.pop(url, None)
    if (found := KEY_LINK.search(printed)) is not None:
        LOCAL_KEYS[url] = found[1]


def with_key(url: str) -> str:
    """The URL with its app's key, as the printed link carries it (unchanged for an app with logins)."""
    parts = urllib.parse.urlsplit(url)
    key = LOCAL_KEYS.get(f"{parts.scheme}://{parts.netloc}")
    if key is None:
        return url
    query = urllib.parse.urlencode([*urllib.parse.parse_qsl(parts.query), ("key", key)])
    return urllib.parse.urlunsplit(parts._replace(path=parts.path or "/", query=query))


def user_make_environment(**settings: str) -> dict[str, str]:
    """hermetic_environment for a `make` the user would type, not a sub-make of `make test`."""
    env = hermetic_environment(**settings)
    for name in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS"):
        env.pop(name, None)
    return env


def pin(cpus: set[int] | None) -> Callable[[], None] | None:
    """A preexec_fn that restricts the child to these CPUs (None: no restriction)."""
    return (lambda: os.sched_setaffinity(0, cpus)) if cpus else None


def launch(
    argv: list[str], env: dict[str, str], log: IO[bytes], cpus: set[int] | None, cwd: Path = ROOT
) -> subprocess.Popen[bytes]:
    """A server process in a session of its own, remembered so that nothing outlives the tests."""
    # The child only sets its CPU affinity before exec.
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=pin(cpus),  # noqa: PLW1509  # see the comment above
    )
    STARTED.append(process)
    return process


@atexit.register
def stop_leftovers() -> None:
    """Last resort when a test run ends without its fixtures' clean-up: no server keeps its port and cores."""
    for process in STARTED:
        if process.poll() is None:
            stop_group(process, signal.SIGKILL)


# Ports handed out in this run: the system gives a port again once it is closed (a few times in 300 asks), and a
# server given its port before it listens (one started late on purpose) would find another server on it.
HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A TCP port nobody listens on right now, never handed out before in this run."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in HANDED_OUT:
            HANDED_OUT.add(port)
            return port


def marked_processes(mark: str) -> list[int]:
    """Every live process whose environment carries the mark (make, vLLM and its engine, the chat UI)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (
                entry.name.isdigit()
                and f"TEST_RUN_MARK={mark}".encode() in (entry / "environ").read_bytes()
                and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            ):
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def port_is_free(port: int) -> bool:
    """A new server can listen on the port (servers set SO_REUSEADDR, so closed connections do not count)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen()
        except OSError:
            return False
    return True


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
    """Signal the process group and wait for it; kill whatever of the group is left."""
    if process.poll() is None:
        os.killpg(process.pid, sig)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    with contextlib.suppress(ProcessLookupError, PermissionError):  # children that outlived their leader
        os.killpg(process.pid, signal.SIGKILL)


class Server(Protocol):
    """Something the tests start and must stop."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


@contextmanager
def running(*servers: Server, also_stopped: Iterable[Server] = ()) -> Iterator[None]:
    """Start the servers in order; whatever happens (a failed start, an interrupt), stop them all."""
    try:
        for server in servers:
            server.start()
        yield
    finally:
        for server in [*reversed(servers), *also_stopped]:
            server.stop()


# Debian's services (PostgreSQL, nginx) that tests run as throwaway servers of their own.
INSTALL_HINT = "run tools/install_services.sh (as root) to install Debian's postgresql and nginx"
# Every such server that stop() has not stopped yet: stopped at exit, before stop_leftovers' SIGKILL of
# whatever is left (atexit runs hooks in reverse order: stop_live is registered after it), so clusters shut
# down cleanly and no temporary folder stays.
LIVE: list[Server] = []


def register(server: Server) -> None:
    """Remember a server until it is stopped for good."""
    if all(live is not server for live in LIVE):
        LIVE.append(server)


def unregister(server: Server) -> None:
    """Forget a stopped server (by identity: dataclasses compare by value)."""
    LIVE[:] = [live for live in LIVE if live is not server]


@atexit.register
def stop_live() -> None:
    """A test run that ends without its fixtures' clean-up still shuts clusters down and removes their folders."""
    for server in list(reversed(LIVE)):
        server.stop()


@dataclass
class Process:
    """A server process and its log file, stopped and closed together."""

    process: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None
    starts: int = 0

    def begin(
        self,
        argv: list[str],
        env: dict[str, str],
        log_path: Path,
        append: bool,
        cpus: set[int] | None,
        cwd: Path = ROOT,
    ) -> subprocess.Popen[bytes]:
        """Start the process, logging to log_path."""
        LOGS.mkdir(parents=True, exist_ok=True)
        self.end()
        self.log = open(log_path, "ab" if append else "wb")  # noqa: SIM115  # open as long as the server; end() closes it
        self.process = launch(argv, env, self.log, cpus, cwd)
        self.starts += 1
        return self.process

    def wait_ready(self, url: str, timeout: float, headers: dict[str, str]) -> None:
        """Wait until url answers; a start that fails or is interrupted leaves nothing running."""
        assert self.process is not None
        try:
            wait_http(url, self.process, START_TIMEOUT or timeout, headers)
        except BaseException:
            self.end()
            raise

    def end(self, sig: int = signal.SIGTERM) -> None:
        """Stop the process group and close the log."""
        if self.process is not None:
            stop_group(self.process, sig)
            self.process = None
        if self.log is not None:
            self.log.close()
            self.log = None


class OpenAIOnLoopback:
    """An OpenAI-compatible server on a loopback port: its root and its API's base URL."""

    port: int

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.root + "/v1"


@dataclass
class ServedModel(OpenAIOnLoopback):
    """A model server the project's `python -m serving` starts (vLLM, or llama.cpp's llama-server)."""

    name: str
    port: int = field(default_factory=free_port)
    max_model_len: int = 256
    api_key: str = "test-key"
    quant: str = "none"
    running: Process = field(default_factory=Process)

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self.running.process

    def serve(self, log_path: Path, timeout: float, cpus: set[int] | None, model: str = "", **settings: str) -> None:
        """Start (or restart) `python -m serving` with the tiny model and these settings; wait for /v1/models."""
        env = hermetic_environment(
            MODEL=model or os.environ.get("TINY_MODEL", str(ROOT / ".cache/models/ernie-tiny")),
            SERVED_MODEL_NAME="ernie-tiny",
            VLLM_HOST="127.0.0.1",
            VLLM_PORT=str(self.port),
            MAX_MODEL_LEN=str(self.max_model_len),
            QUANT=self.quant,
            API_KEY=self.api_key,
            **settings,
        )
        restart = self.running.starts > 0  # a restart appends to the log
        self.running.begin([sys.executable, "-m", "serving"], env, log_path, restart, cpus)
        self.running.wait_ready(self.base_url + "/models", timeout, {"Authorization": f"Bearer {self.api_key}"})

    def stop(self) -> None:
        self.running.end()


@dataclass
class VllmServer(ServedModel):
    """A vLLM process serving the tiny ERNIE-4.5 model, started with `python -m serving`."""

    model: str = ""
    cpus: set[int] | None = None
    # More of vLLM's arguments (e.g. "--runner pooling --convert embed": the tiny model as an embedding model).
    extra_args: str = ""

    @property
    def log_path(self) -> Path:
        return LOGS / f"vllm-{self.name}.log"

    def start(self, timeout: float = 240) -> None:
        """Start (or restart) the server and wait until /v1/models answers."""
        self.serve(
            self.log_path,
            timeout,
            self.cpus,
            self.model,
            MAX_NUM_SEQS="64",
            PROFILE="dev",
            VLLM_LOGGING_CONFIG_PATH=str(HERE / "vllm_logging.json"),
            VLLM_EXTRA_ARGS=f"--enable-log-requests --max-log-len 100000 {self.extra_args}".strip(),
            # vLLM's OpenMP threads spin: one core for it, the other for the app, the browser and pytest.
            VLLM_CPU_OMP_THREADS_BIND=",".join(map(str, sorted(self.cpus))) if self.cpus else "0",
        )

    def kill(self) -> None:
        """Kill the server at once, as a crash would."""
        self.running.end(signal.SIGKILL)

    def metric(self, name: str, label: str = "") -> float:
        """One Prometheus gauge or counter of vLLM, summed over the series whose labels contain label."""
        # Generous: a niced vLLM beside another one generating on a slow shared core once took over 5 s to answer.
        with urllib.request.urlopen(self.root + "/metrics", timeout=30) as reply:
            text = reply.read().decode()
        total = 0.0
        for line in text.splitlines():
            if (line.startswith(name + "{") or line.startswith(name + " ")) and label in line:
                total += float(line.rsplit(" ", 1)[1])
        return total

    def count_tokens(self, prompt: str) -> int:
        """Tokens of an already rendered prompt."""
        return self.tokenize({"prompt": prompt, "add_special_tokens": False})

    def count_chat_tokens(self, messages: list[dict[str, str]]) -> int:
        """Tokens of a chat prompt as vLLM renders it, exactly."""
        return self.tokenize({"messages": messages, "add_generation_prompt": True})

    def render(self, messages: list[dict[str, str]]) -> str:
        """The prompt vLLM renders for these chat messages, as its request log shows it."""
        tokens = self.post("/tokenize", {"messages": messages, "add_generation_prompt": True})["tokens"]
        return str(self.post("/detokenize", {"tokens": tokens})["prompt"])

    def post(self, path: str, request_body: dict[str, object]) -> dict[str, Any]:
        """A JSON POST to vLLM's server root."""
        body = json.dumps({"model": "ernie-tiny", **request_body}).encode()
        request = urllib.request.Request(
            self.root + path,
            data=body,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.api_key}"},
        )
        with urllib.request.urlopen(request, timeout=10) as reply:
            answer: dict[str, Any] = json.loads(reply.read())
            return answer

    def tokenize(self, request_body: dict[str, object]) -> int:
        """vLLM's /tokenize count for a request body."""
        return int(self.post("/tokenize", request_body)["count"])

    def logged_requests(self) -> list[dict[str, str]]:
        """Requests vLLM logged: their rendered prompt and sampling parameters, oldest first."""
        text = self.log_path.read_text(errors="replace")
        prompts = {
            m[1]: ast.literal_eval(m[2])
            for m in re.finditer(r"Request (\S+) details: prompt: ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")", text)
        }
        requests = []
        for match in re.finditer(r"Received request (\S+): params: SamplingParams\((.*?)\), lora", text):
            request_id, params = match[1], match[2]
            values = dict(re.findall(r"(\w+)=([^,]+)", params))
            requests.append({"id": request_id, "prompt": prompts.get(request_id, ""), **values})
        return requests


@dataclass
class GpuFakeServer(OpenAIOnLoopback):
    """The stand-in for vLLM on a GPU (tests/support/gpu_fake.py): `rate` tokens a second per stream."""

    name: str
    rate: float = 128.0
    interval: int = 1  # tokens per event (vLLM's --stream-interval)
    cpus: set[int] | None = None
    port: int = field(default_factory=free_port)
    api_key: str = ""
    running: Process = field(default_factory=Process)

    def start(self, timeout: float = 30) -> None:
        """Start it and wait until it serves the model."""
        argv = [sys.executable, "-m", "tests.support.gpu_fake", "--port", str(self.port)]
        argv += ["--rate", str(self.rate), "--interval", str(self.interval)]
        log = LOGS / f"gpu-fake-{self.name}.log"
        self.running.begin(argv, hermetic_environment(), log, False, self.cpus)
        self.running.wait_ready(self.base_url + "/models", timeout, {})

    def stats(self) -> dict[str, int]:
        """What it served: streams started, finished and aborted, tokens and events."""
        with urllib.request.urlopen(self.root + "/stats", timeout=5) as reply:
            return dict(json.loads(reply.read()))

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self.running.process

    def stop(self) -> None:
        self.running.end()


@dataclass
class RouterServer(OpenAIOnLoopback):
    """vLLM's router in front of vLLM servers, started with `python -m serving.router` (make router)."""

    name: str
    servers: list[VllmServer]
    policy: str = "consistent_hash"
    port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    running: Process = field(default_factory=Process)

    @property
    def api_key(self) -> str:
        return self.servers[0].api_key

    @property
    def log_path(self) -> Path:
        return LOGS / f"router-{self.name}.log"

    def start(self, timeout: float = 60) -> None:
        """Start the router and wait until it serves the model."""
        env = hermetic_environment(
            VLLM_SERVERS=" ".join(server.root for server in self.servers),
            ROUTER_HOST="127.0.0.1",
            ROUTER_PORT=str(self.port),
            ROUTER_METRICS_PORT=str(self.metrics_port),
            ROUTER_POLICY=self.policy,
            ROUTER_VENV=os.environ.get("ROUTER_VENV", str(ROOT / ".venv-router")),
        )
        self.running.begin([sys.executable, "-m", "serving.router"], env, self.log_path, True, None)
        self.running.wait_ready(self.base_url + "/models", timeout, {"Authorization": f"Bearer {self.api_key}"})

    def answering(self) -> int:
        """How many servers the router's health checks find answering."""
        try:
            with urllib.request.urlopen(self.root + "/readiness", timeout=5) as reply:
                body = reply.read()
        except urllib.error.HTTPError as refused:  # 503 when none answers, with the same count
            body = refused.read()
        return int(json.loads(body)["healthy_workers"])

    def stop(self) -> None:
        self.running.end()


class ModelServer(Protocol):
    """What the app needs of a model server: vLLM or llama.cpp's llama-server."""

    @property
    def name(self) -> str: ...

    @property
    def base_url(self) -> str: ...

    @property
    def api_key(self) -> str: ...


@dataclass
class ChatApp:
    """The Chainlit app, started as `python -m app` against a model server (vLLM or llama.cpp)."""

    vllm: ModelServer
    port: int = field(default_factory=free_port)
    extra_env: dict[str, str] = field(default_factory=dict)
    cpus: set[int] | None = None
    reconnect_grace: float = 0.0  # the product's default: a closed tab stops its answer at once
    running: Process = field(default_factory=Process)
    data_dir: Path | None = None  # the history and login secret; None: a fresh folder of its own
    tree: Path = ROOT  # the checkout whose app runs (a benchmark's baseline: another one)

    def __post_init__(self) -> None:
        if self.data_dir is None:
            self.data_dir = LOGS.parent / "data" / f"{self.vllm.name}-{self.port}"
            shutil.rmtree(self.data_dir, ignore_errors=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return LOGS / f"chainlit-{self.vllm.name}-{self.port}.log"

    def start(self, timeout: float = 90) -> None:
        env = hermetic_environment(
            VLLM_BASE_URL=self.vllm.base_url,
            API_KEY=self.vllm.api_key,
            READINESS_POLL_SECONDS="0.5",
            RECONNECT_GRACE_SECONDS=str(self.reconnect_grace),
            CHAT_HOST="127.0.0.1",
            CHAT_PORT=str(self.port),
            DATA_DIR=str(self.data_dir),
            OPEN_BROWSER="false",  # no window on a developer's display
            **self.extra_env,
        )
        started_at = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.running.begin([sys.executable, "-m", "app"], env, self.log_path, True, self.cpus, self.tree)
        self.running.wait_ready(self.url + "/", timeout, {})
        with open(self.log_path, "rb") as log:  # this start's lines: the log goes on across restarts
            log.seek(started_at)
            remember_key(self.url, log.read().decode(errors="replace"))

    @property
    def key_link(self) -> str:
        """The link the app printed for the local user."""
        return with_key(self.url)

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self.running.process

    def stop(self) -> None:
        self.running.end()
