"""GET /ready: whether this app can answer now (vLLM serves, the history database answers), for a balancer.

With a history, it also says how many writes wait in the journal for the database, the oldest one's age, and how
many chats' writes the database holds back for a reason of its own (an operator should look); behind
vLLM's router, how many of its vLLM servers answer.
"""

from __future__ import annotations

import functools

from starlette.responses import JSONResponse

from app.chat.backend import Backend
from app.history.store import ChatStore
from app.page import seam


def install(backend: Backend, store: ChatStore | None) -> None:
    """Serve /ready on the chat's own address (no login: a balancer asks it)."""
    seam.add_route("/ready", functools.partial(ready, backend, store))


async def ready(backend: Backend, store: ChatStore | None) -> JSONResponse:
    """200 with each part "ok", or 503 naming the part that is not."""
    checks = {"vllm": await backend.serving()}
    if store is not None:
        checks["database"] = await store.reachable()
    body: dict[str, object] = {part: "ok" if up else "unavailable" for part, up in checks.items()}
    if (servers := await backend.servers()) is not None:
        body |= {"vllm_servers_answering": servers.answering, "vllm_servers": servers.total}
    if store is not None and store.writer.journal is not None:
        waiting, age_s = store.writer.journal.waiting()
        body |= {"waiting_writes": waiting, "oldest_waiting_write_s": round(age_s, 1)}
        body["chats_held"] = len(store.writer.held)  # writes the database refuses for a reason of its own
    return JSONResponse(body, status_code=200 if all(checks.values()) else 503)
