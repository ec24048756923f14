"""A /v1/chat/completions request read as the app answers it: vLLM's fields it honours, those it refuses (they would
change the answer's shape), the messages as plain text; every refusal in OpenAI's shape."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.web.openai_errors import ApiRefusal

# Fields of OpenAI's request the app does not answer: each would change what comes back (tools, several choices,
# log-probabilities) or how it is sampled beyond vLLM's usual sampling.
REFUSED = (
    "tools",
    "tool_choice",
    "functions",
    "function_call",
    "logprobs",
    "top_logprobs",
    "logit_bias",
    "stop",
    "response_format",
    "presence_penalty",
    "frequency_penalty",
    "best_of",
    "echo",
    "prompt",
    "suffix",
    "audio",
    "modalities",
    "prediction",
    "guided_json",
    "guided_regex",
    "guided_choice",
    "structured_outputs",
)
# Values of a refused field that change nothing (a client library may send them always).
HARMLESS: tuple[Any, ...] = (None, False, 0, 0.0, [], {}, {"type": "text"})
Number = Annotated[float, Field(allow_inf_nan=False)]


class Part(BaseModel):
    """A piece of a message's content: text only."""

    type: Literal["text"]
    text: str


class Said(BaseModel):
    """One message of the conversation a client sends."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[Part] | None = None

    def as_message(self) -> dict[str, str]:
        """The message as the model server gets it (a developer's message is a system one to it)."""
        text = self.content if isinstance(self.content, str) else "".join(p.text for p in self.content or [])
        return {"role": "system" if self.role == "developer" else self.role, "content": text}


class StreamOptions(BaseModel):
    include_usage: bool = False


class Asked(BaseModel):
    """The fields of a chat completion request the app honours; others are ignored, those in REFUSED refused."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1)
    messages: list[Said] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: Number | None = None
    top_p: Number | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    repetition_penalty: Number | None = None
    seed: int | None = None
    n: int = Field(1, ge=1, le=1)
    # The app's own: a chat of the caller's to keep this call in ("new": a new one).
    chat_id: str | None = Field(None, min_length=1, max_length=36)

    @property
    def most_tokens(self) -> int | None:
        """The longest answer asked for (None: as long as the window leaves room for)."""
        return self.max_completion_tokens or self.max_tokens


def asked(body: bytes) -> Asked:
    """The request in a body, or an OpenAI-shaped 400 saying what is wrong with it."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise ApiRefusal(400, "We could not parse the JSON body of your request: send a JSON object.") from None
    if not isinstance(data, dict):
        raise ApiRefusal(400, "The request body must be a JSON object.")
    for name in REFUSED:
        if name in data and data[name] not in HARMLESS:
            raise ApiRefusal(400, f"'{name}' is not supported here: this endpoint answers with text only.", param=name)
    try:
        return Asked.model_validate(data)
    except ValidationError as invalid:
        problem = invalid.errors()[0]
        param = ".".join(str(part) for part in problem["loc"]) or None
        raise ApiRefusal(400, f"Invalid request: {param}: {problem['msg']}", param=param) from None
