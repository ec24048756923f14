"""Application settings, read once from the environment and .env."""

from __future__ import annotations

import ipaddress
import os
import re
import sys
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

from dotenv import dotenv_values
from pydantic import Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_MODEL = "baidu/ERNIE-4.5-0.3B-PT"
DEFAULT_SYSTEM_PROMPT = "You are ERNIE, a helpful, concise and honest assistant."
ROOT = Path(__file__).resolve().parent.parent
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
# Settings where an empty value is a choice of its own rather than "use the default".
BLANK_IS_A_VALUE = frozenset({"system_prompt"})
# File name endings that may be attached: text, Markdown, data, source code, PDF.
UPLOAD_TYPES = (
    ".txt,.md,.markdown,.rst,.csv,.tsv,.json,.jsonl,.yaml,.yml,.toml,.ini,.cfg,.xml,.html,.css,.log,.sql,"
    ".py,.js,.jsx,.tsx,.java,.kt,.c,.h,.cc,.cpp,.hpp,.cs,.go,.rs,.rb,.php,.swift,.sh,.r,.m,.pdf"
)


class EnvSettings(BaseSettings):
    """Settings read from environment variables named like the fields; `NAME=` means the default."""

    model_config = SettingsConfigDict(frozen=True, protected_namespaces=(), extra="ignore", env_file=None)

    @field_validator("*", mode="before")
    @classmethod
    def _blank_means_default(cls, value: Any, info: ValidationInfo) -> Any:
        """.env.example lists every variable with an empty value where the default applies."""
        if value == "" and info.field_name is not None and info.field_name not in BLANK_IS_A_VALUE:
            return cls.model_fields[info.field_name].get_default(call_default_factory=True)
        return value


SettingsT = TypeVar("SettingsT", bound=EnvSettings)


def listens_on_one_other_address(host: str) -> bool:
    """True for a specific address or name other than loopback (not one meaning every interface)."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return host not in ("", "localhost")
    return not (address.is_loopback or address.is_unspecified)


def dotenv_file() -> Path | None:
    """The project's .env, unless python-dotenv's PYTHON_DOTENV_DISABLED turns .env files off (the tests do)."""
    if os.environ.get("PYTHON_DOTENV_DISABLED", "").casefold() in {"1", "true", "t", "yes", "y"}:
        return None
    return ROOT / ".env"


def openid_configured() -> bool:
    """Whether Chainlit will offer an OAuth / OpenID Connect sign-in: a provider's OAUTH_*_CLIENT_ID is set
    (in the environment or .env, which Chainlit loads itself)."""
    path = dotenv_file()
    found = {**(dotenv_values(path) if path is not None and path.exists() else {}), **os.environ}
    return any(re.fullmatch(r"OAUTH_[A-Z0-9_]+_CLIENT_ID", name) and value for name, value in found.items())


def load_or_explain(load: Callable[[], SettingsT], program: str) -> SettingsT | None:
    """The settings, or None after printing one line per bad variable, naming the program."""
    try:
        return load()
    except ValidationError as exc:
        for line in explain(exc):
            print(f"{program}: {line}", file=sys.stderr)
        return None


def explain(error: ValidationError) -> list[str]:
    """One line per bad variable, naming it as the user wrote it."""
    return [
        f"{str(problem['loc'][0]).upper() if problem['loc'] else 'settings'}={problem.get('input')!s}: {problem['msg']}"
        for problem in error.errors()
    ]


# Once a chat fills the window, its oldest turns are left out down to this share of the room the prompt has (the
# window less the reply's tokens), not just as many as make the next message fit. The turns after that start at
# the same message, so vLLM reuses its prefix cache for everything but the newest turn, until the chat fills the
# room again and takes another step. Leaving out the fewest turns instead moves the prompt's start every turn and
# vLLM computes the whole conversation again each time: on 2 AVX2 cores at an 8 192-token window, 80-100 s before
# each answer, against 6.6 s with the start kept (37 s at a step). Half: a kept turn finds at least half / (half
# + a turn) of its prompt cached (>= 90 % with ~450-token turns) and a step comes every ~9 turns, while the model
# still sees half the window of the chat (docs/benchmarks.md, "A long chat past the window").
DEFAULT_LOW_WATER = 0.5
# A question about a chat's documents gets at most this share of the prompt's room for their passages; the chat's
# earlier turns keep the rest, so a follow-up still sees what was said before it.
DEFAULT_DOCUMENT_SHARE = 0.6
# A question's passages take at most this many tokens: on a CPU every prompt token costs prefill time before the
# first word. Chosen from the curve of the answer's passage sent against the first token's time (docs/documents.md,
# "How many passages"); `make run` hands the app the serving plan's budget (0 on a GPU: DOCUMENT_SHARE alone).
DEFAULT_DOCUMENT_TOKENS = 2000
# The most pages and characters of text one file may bring: a thousand-page manual is read, a whole library in one
# file is refused before it takes a worker for many minutes.
DEFAULT_UPLOAD_MAX_PAGES = 2000
DEFAULT_UPLOAD_MAX_CHARACTERS = 5_000_000
# While an answer streams, its text so far is written to the history this often: an app killed mid-answer (SIGKILL,
# the machine down) keeps what the page showed until at most this long before (`make bench BENCH_ARGS="--history
# checkpoints"` compares the history with and without them).
DEFAULT_ANSWER_CHECKPOINT_S = 3.0


class Settings(EnvSettings):
    """Everything the chat app needs to know; field names match the environment variables."""

    vllm_host: str = Field("127.0.0.1", description="vLLM's address, when VLLM_BASE_URL is not set")
    vllm_port: int = Field(8000, ge=1, le=65535)
    vllm_base_url: str = Field("", description="OpenAI API of vLLM; empty: from VLLM_HOST and VLLM_PORT")
    api_key: SecretStr = Field(SecretStr(""), description="vLLM --api-key; empty: none")
    model_name: str = Field("", description="served model name; empty: ask /v1/models")
    model: str = Field(DEFAULT_MODEL, description="weights vLLM loads (hub id or folder)")
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    # The model's own recommendation (its generation_config.json); README: what each costs on a CPU.
    temperature: float = Field(0.8, ge=0.0, le=2.0)
    top_p: float = Field(0.8, gt=0.0, le=1.0)
    max_tokens: int = Field(512, ge=1)
    max_tokens_limit: int = Field(4096, ge=1, description="upper end of the max tokens slider")
    repetition_penalty: float = Field(1.0, ge=1.0, le=2.0, description="1: off, as the model recommends")
    request_timeout: float = Field(120.0, gt=0, description="seconds without a byte from vLLM")
    connect_timeout: float = Field(3.0, gt=0)
    language: str = Field("", description="force en-US or zh-CN; empty: the browser's")
    greeting_en: str = ""
    greeting_zh: str = ""
    readiness_poll_seconds: float = Field(2.0, gt=0)
    reconnect_grace_seconds: float = Field(0.0, ge=0, description="a lost connection's time to come back; 0: none")
    stream_interval_ms: float = Field(30.0, ge=0, description="join deltas into one UI update per interval")
    stream_updates_per_second: int = Field(
        3000, ge=0, description="page updates a second over all answers, past which each answer's are spaced out"
    )
    answer_checkpoint_seconds: float = Field(
        DEFAULT_ANSWER_CHECKPOINT_S,
        ge=0,
        description="how often a streaming answer's text so far is written to the history; 0: only at its end",
    )
    context_low_water: float = Field(
        DEFAULT_LOW_WATER,
        gt=0,
        le=1,
        description="share of the room a full chat steps down to: vLLM reuses its cache",
    )
    chat_host: str = Field("127.0.0.1", description="address the chat UI listens on")
    chat_port: int = Field(7860, ge=1, le=65535, description="Chainlit's own 8000 is vLLM's")
    history: bool = Field(True, description="keep chats (sidebar, resume, export) and know who is who")
    data_dir: Path = Field(ROOT / "data", description="the SQLite history and the login secret")
    database_url: str = Field("", description="SQLite or PostgreSQL URL of the history; empty: DATA_DIR/chat.db")
    database_timeout: float = Field(
        15.0, gt=0, description="seconds to wait for the history database before writes wait in the journal"
    )
    journal_dir: Path = Field(
        Path(""), description="folder of the journal of writes the database could not take yet; empty: DATA_DIR/journal"
    )
    journal_max_mb: int = Field(100, ge=1, description="the most the journal holds, in MB; writes past it are not kept")
    allowed_origins: str = Field(
        "", description="web origins that may use the chat, comma-separated; empty: the chat's own address; *: any"
    )
    login_attempts: int = Field(5, ge=1, description="failed logins per user name in the window before 429")
    login_window_minutes: float = Field(5.0, gt=0, description="the sliding window failed logins are counted in")
    login_hours: float = Field(168.0, gt=0, description="how long a login lasts before asking again")
    trusted_proxies: str = Field(
        "",
        description="addresses (or networks) of the reverse proxies that sign people in, comma-separated; "
        "empty: no sign-on header is trusted",
    )
    trusted_user_header: str = Field("X-Forwarded-User", description="the proxy's header naming the signed-in user")
    trusted_email_header: str = Field(
        "", description="the proxy's header with the user's e-mail (e.g. X-Forwarded-Email); empty: none believed"
    )
    trusted_groups_header: str = Field(
        "", description="the proxy's header with the user's groups (e.g. X-Forwarded-Groups); empty: none believed"
    )
    sign_on_verified_email_providers: str = Field(
        "",
        description="sign-on providers whose e-mails count as verified without an email_verified claim "
        "(proxy, generic, github ...), comma-separated",
    )
    sign_on_groups_claim: str = Field("groups", description="the OpenID Connect claim listing the user's groups")
    sign_on_admin_group: str = Field(
        "", description="the group whose members are admins when they sign on (header or OIDC); empty: none"
    )
    answers_per_user: int = Field(2, ge=1, description="answers one user may have streaming at once, all tabs")
    messages_per_minute: int = Field(20, ge=1, description="messages one user may send in a minute")
    daily_token_quota: int = Field(0, ge=0, description="tokens (prompt + answer) per user and UTC day; 0: none")
    limit_local_user: bool = Field(False, description="apply the per-user limits to the passwordless local user")
    open_browser: bool = Field(True, description="open the local user's link in a browser when there is a display")
    metrics_port: int = Field(0, ge=0, le=65535, description="Prometheus metrics on 127.0.0.1:PORT; 0: off")
    frame_ancestors: str = Field("", description="web origins that may show the chat in a frame; empty: none")
    max_request_mb: float = Field(2.0, gt=0, description="largest request body, uploads included (413 beyond)")
    share_links: Literal["users", "anyone"] = Field(
        "users", description="who may open a chat's read-only link: logged-in users, or anyone with the link"
    )
    upload_max_mb: int = Field(
        20, ge=1, description="largest attached file or document (MB); a larger upload gets 413 unread"
    )
    upload_max_files: int = Field(5, ge=1, description="files attached to one message")
    upload_max_pages: int = Field(DEFAULT_UPLOAD_MAX_PAGES, ge=1, description="pages of one attached PDF")
    upload_max_characters: int = Field(
        DEFAULT_UPLOAD_MAX_CHARACTERS, ge=1, description="characters of text one attached file may bring"
    )
    upload_types: str = Field(UPLOAD_TYPES, description="file name endings that may be attached, comma-separated")
    import_max_mb: int = Field(
        200, ge=1, description="largest chat export imported on the chats page (MB): the upload, and its text unpacked"
    )
    library_max_mb: int = Field(200, ge=1, description="documents one user may keep, in MB of the files uploaded")
    documents_per_chat: int = Field(10, ge=1, description="documents one chat's questions may search")
    document_share: float = Field(
        DEFAULT_DOCUMENT_SHARE, gt=0, lt=1, description="share of the prompt's room a question's passages may fill"
    )
    document_tokens: int = Field(
        DEFAULT_DOCUMENT_TOKENS,
        ge=0,
        description="tokens a question's passages may take, a CPU's prefill budget; 0: DOCUMENT_SHARE of the room "
        "alone (a GPU)",
    )
    embeddings_url: str = Field(
        "", description="OpenAI API of an embedding model (e.g. a second vLLM); empty: keyword search alone"
    )
    embeddings_model: str = Field("", description="the embedding model's served name; empty: the first listed")
    embeddings_api_key: SecretStr = Field(SecretStr(""), description="the embedding server's API key; empty: none")
    api_keys_per_user: int = Field(10, ge=1, description="personal API keys one user may hold at once")
    memory_max_tokens: int = Field(
        256, ge=0, description="tokens a user's memory may take at the system prompt's start; 0: memory off"
    )

    @field_validator("data_dir")
    @classmethod
    def _from_project_root(cls, value: Path) -> Path:
        """A relative folder is the project's, wherever the app was started from."""
        return value if value.is_absolute() else ROOT / value

    @property
    def journal_folder(self) -> Path:
        """Where the journal is kept: JOURNAL_DIR (relative: the project's), else DATA_DIR/journal."""
        if not str(self.journal_dir) or self.journal_dir == Path():
            return self.data_dir / "journal"
        return self.journal_dir if self.journal_dir.is_absolute() else ROOT / self.journal_dir

    @field_validator("allowed_origins", "frame_ancestors")
    @classmethod
    def _origins_only(cls, value: str) -> str:
        """Each entry is a scheme and a host (and port), nothing more: what browsers send as Origin."""
        for origin in (o.strip() for o in value.split(",") if o.strip()):
            parts = urlsplit(origin)
            if origin != "*" and (
                parts.scheme not in ("http", "https")
                or not parts.hostname
                or parts.path not in ("", "/")
                or parts.query
                or parts.fragment
            ):
                raise ValueError(f"{origin!r} is not an origin like https://chat.example.com")
        return value

    @field_validator("upload_types")
    @classmethod
    def _endings_only(cls, value: str) -> str:
        """Each entry is a file name ending like .txt."""
        for ending in (e.strip() for e in value.split(",") if e.strip()):
            if not re.fullmatch(r"\.[A-Za-z0-9_+-]+", ending):
                raise ValueError(f"{ending!r} is not a file name ending like .txt")
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _addresses_only(cls, value: str) -> str:
        """Each entry is an IP address or network: a host name could be anyone's tomorrow."""
        for entry in (e.strip() for e in value.split(",") if e.strip()):
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError as error:
                raise ValueError(f"{entry!r} is not an IP address or network like 10.1.2.5 or 10.1.2.0/24") from error
        return value

    @property
    def proxy_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        """The trusted proxies' networks (a single address is a network of one)."""
        entries = (e.strip() for e in self.trusted_proxies.split(",") if e.strip())
        return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)

    @property
    def verified_email_providers(self) -> frozenset[str]:
        """The sign-on providers trusted to verify the e-mails they send."""
        return frozenset(p.strip() for p in self.sign_on_verified_email_providers.split(",") if p.strip())

    @property
    def upload_endings(self) -> frozenset[str]:
        """The file name endings that may be attached, lower case."""
        return frozenset(e.strip().lower() for e in self.upload_types.split(",") if e.strip())

    @property
    def base_url(self) -> str:
        """The OpenAI API root of vLLM."""
        return self.vllm_base_url or f"http://{self.vllm_host}:{self.vllm_port}/v1"

    @property
    def server_root(self) -> str:
        """The vLLM server root (for /tokenize, /health, /metrics)."""
        url = self.base_url.rstrip("/")
        return url[: -len("/v1")] if url.endswith("/v1") else url

    @property
    def origins(self) -> tuple[str, ...]:
        """The web origins allowed to use the chat: the setting, or the chat's own address as browsers write it."""
        if self.allowed_origins.strip():
            return tuple(origin.strip() for origin in self.allowed_origins.split(",") if origin.strip())
        hosts = ["localhost", "127.0.0.1", "[::1]"]
        if listens_on_one_other_address(self.chat_host):
            hosts.append(f"[{self.chat_host}]" if ":" in self.chat_host else self.chat_host)
        return tuple(f"http://{host}:{self.chat_port}" for host in hosts)

    @property
    def frame_ancestor_origins(self) -> tuple[str, ...]:
        """The origins whose pages may frame the chat (none: the chat is never shown in a frame)."""
        return tuple(origin.strip() for origin in self.frame_ancestors.split(",") if origin.strip())

    @property
    def hosts(self) -> tuple[str, ...]:
        """Host names requests may be addressed to: the allowed origins' and loopback (no DNS name can rebind those)."""
        if "*" in self.origins:
            return ("*",)
        named = {urlsplit(origin).hostname or "" for origin in self.origins}
        return tuple(sorted(named | set(LOOPBACK_HOSTS)))


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings: real environment variables first, then .env."""
    return Settings(_env_file=dotenv_file())
