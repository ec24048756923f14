"""Application settings, read once from the environment and .env."""

from __future__ import annotations

import os
from functools import lru_cache

from dotenv import load_dotenv
from pydantic import BaseModel, Field, SecretStr

DEFAULT_MODEL = "baidu/ERNIE-4.5-0.3B-PT"
DEFAULT_SYSTEM_PROMPT = "You are ERNIE, a helpful, concise and honest assistant."


class Settings(BaseModel):
    """Everything the chat app needs to know; field names match the environment variables."""

    model_config = {"frozen": True, "protected_namespaces": ()}

    vllm_base_url: str = Field("http://127.0.0.1:8000/v1", description="OpenAI API of vLLM")
    api_key: SecretStr = Field(SecretStr(""), description="vLLM --api-key; empty: none")
    model_name: str = Field("", description="served model name; empty: ask /v1/models")
    model: str = Field(DEFAULT_MODEL, description="weights vLLM loads (hub id or folder)")
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    temperature: float = Field(0.7, ge=0.0, le=2.0)
    top_p: float = Field(0.9, gt=0.0, le=1.0)
    max_tokens: int = Field(512, ge=1)
    max_tokens_limit: int = Field(4096, ge=1, description="upper end of the max tokens slider")
    repetition_penalty: float = Field(1.05, ge=1.0, le=2.0)
    request_timeout: float = Field(120.0, gt=0, description="seconds without a byte from vLLM")
    connect_timeout: float = Field(3.0, gt=0)
    language: str = Field("", description="force en-US or zh-CN; empty: the browser's")
    greeting_en: str = ""
    greeting_zh: str = ""
    readiness_poll_seconds: float = Field(2.0, gt=0)
    reconnect_grace_seconds: float = Field(0.0, ge=0, description="a lost connection's time to come back; 0: none")
    stream_interval_ms: float = Field(30.0, ge=0, description="join deltas into one UI update per interval")
    chat_host: str = Field("127.0.0.1", description="address the chat UI listens on")
    chat_port: int = Field(7860, ge=1, le=65535, description="Chainlit's own 8000 is vLLM's")

    @property
    def server_root(self) -> str:
        """The vLLM server root (for /tokenize, /health, /metrics)."""
        url = self.vllm_base_url.rstrip("/")
        return url[: -len("/v1")] if url.endswith("/v1") else url

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "Settings":
        """Build settings from an environment mapping (defaults apply to unset or empty values)."""
        env = os.environ if environ is None else environ
        values = {name: env[name.upper()] for name in cls.model_fields if env.get(name.upper())}
        if "vllm_base_url" not in values and (env.get("VLLM_HOST") or env.get("VLLM_PORT")):
            host = env.get("VLLM_HOST") or "127.0.0.1"
            port = env.get("VLLM_PORT") or "8000"
            values["vllm_base_url"] = f"http://{host}:{port}/v1"
        # A blank SYSTEM_PROMPT is a valid choice: no system line at all.
        if "SYSTEM_PROMPT" in env:
            values["system_prompt"] = env["SYSTEM_PROMPT"]
        return cls(**values)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings: .env first loaded, real environment variables win."""
    load_dotenv(override=False)
    return Settings.from_env()
