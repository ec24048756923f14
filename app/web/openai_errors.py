"""Refusals in OpenAI's error shape, for the /v1 routes' clients (the `openai` SDK, `llm`, curl): made by the routes
themselves and by the guards in front of them (a body too big)."""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import Response

# The app's OpenAI-compatible routes.
API_PREFIX = "/v1/"
CHAT_COMPLETIONS = "/v1/chat/completions"
MODELS = "/v1/models"


class ApiRefusal(Exception):
    """A /v1 request refused: its status and what OpenAI's API would say (message, type, param, code)."""

    def __init__(
        self,
        status: int,
        message: str,
        kind: str = "invalid_request_error",
        *,
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.code = code
        self.param = param
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        """The refusal as OpenAI writes one."""
        return error_body(self.message, self.kind, code=self.code, param=self.param)

    def response(self) -> Response:
        """The refusal as an HTTP response."""
        return Response(
            json.dumps(self.body()), status_code=self.status, media_type="application/json", headers=self.headers
        )


def error_body(
    message: str, kind: str = "invalid_request_error", *, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """`{"error": {...}}` as OpenAI's API (and vLLM's) writes it."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
