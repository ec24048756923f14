"""What the /v1 routes answer, in vLLM's own shapes: a completion, its streamed chunks, the model list; a ChatError
as OpenAI's error."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from app.chat.backend import LLAMA_CPP, ModelInfo
from app.chat.reply import Replied
from app.errors import ChatError, Problem
from app.i18n import error_text
from app.web.openai_errors import ApiRefusal

# Each refusal of the chat core as OpenAI's API says it: status, type, code.
REFUSALS: dict[Problem, tuple[int, str, str]] = {
    Problem.MESSAGE_TOO_LONG: (400, "invalid_request_error", "context_length_exceeded"),
    Problem.REJECTED: (400, "invalid_request_error", "invalid_request"),
    Problem.ANSWERS_AT_ONCE: (429, "requests", "rate_limit_exceeded"),
    Problem.TOO_MANY_MESSAGES: (429, "requests", "rate_limit_exceeded"),
    Problem.QUOTA_USED: (429, "insufficient_quota", "insufficient_quota"),
    Problem.TIMEOUT: (504, "server_error", "model_server_timeout"),
}
# Anything else is the model server's failure.
MODEL_SERVER_FAILED = (502, "server_error", "model_server_error")


def refusal_of(error: ChatError, lang: str) -> ApiRefusal:
    """A ChatError as OpenAI's error, in the words the page uses; when to ask again, where that is known."""
    status, kind, code = REFUSALS.get(error.problem, MODEL_SERVER_FAILED)
    headers: dict[str, str] = {}
    if error.problem is Problem.TOO_MANY_MESSAGES:
        headers["Retry-After"] = str(error.details.get("seconds", 60))
    if error.problem is Problem.QUOTA_USED:
        # Not before midnight (UTC): the OpenAI SDK asks again at once on a 429 unless told not to.
        headers |= {"Retry-After": str(int(str(error.details.get("hours", 1))) * 3600), "X-Should-Retry": "false"}
    param = "messages" if error.problem is Problem.MESSAGE_TOO_LONG else None
    return ApiRefusal(status, error_text(lang, error), kind, code=code, param=param, headers=headers)


def event(data: dict[str, Any] | str) -> bytes:
    """One server-sent event, as vLLM streams them."""
    return f"data: {data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)}\n\n".encode()


def models(model: ModelInfo) -> dict[str, Any]:
    """GET /v1/models: the model the app answers with."""
    owner = "llamacpp" if model.engine == LLAMA_CPP else "vllm"
    card = {"id": model.name, "object": "model", "created": int(time.time()), "owned_by": owner, "root": model.name}
    return {"object": "list", "data": [card | {"parent": None, "max_model_len": model.max_model_len}]}


def usage(replied: Replied) -> dict[str, int]:
    """The tokens an answer took, as the model server counted them."""
    prompt, completion = replied.prompt_tokens or 0, replied.tokens or 0
    return {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion}


@dataclass(frozen=True)
class Completion:
    """One answer's envelope: its id, when, which model."""

    model: str
    id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex}")
    created: int = field(default_factory=lambda: int(time.time()))

    def whole(self, replied: Replied) -> dict[str, Any]:
        """A completion not streamed."""
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": replied.text, "tool_calls": []},
            "logprobs": None,
            "finish_reason": replied.finish_reason or "stop",
            "stop_reason": None,
        }
        return self.envelope("chat.completion") | {"choices": [choice], "usage": usage(replied)}

    def chunk(self, delta: dict[str, str], finish_reason: str | None = None) -> dict[str, Any]:
        """A streamed chunk: more of the answer, or its end."""
        choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return self.envelope("chat.completion.chunk") | {"choices": [choice]}

    def usage_chunk(self, replied: Replied) -> dict[str, Any]:
        """The streamed chunk with the answer's usage (asked for with stream_options.include_usage)."""
        return self.envelope("chat.completion.chunk") | {"choices": [], "usage": usage(replied)}

    def envelope(self, kind: str) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}
