"""The account page's JSON routes: the caller's API keys (made, shown once, revoked) and memory (facts added,
edited, paused, deleted); each only ever reads or changes the caller's own."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Annotated, Any

from fastapi import Depends, HTTPException
from pydantic import BaseModel, Field

from app.chat.memory import FACT_MAX_CHARS, one_line
from app.history.api_keys import ApiKeys, Made
from app.history.memories import MOST_FACTS, Kept, Memories
from app.history.team import Team
from app.web.app_pages import page_user, serve_page_routes

log = logging.getLogger(__name__)
PREFIX = "/account/api"
ID = Field(min_length=1, max_length=36)
# A fact as typed: at most a fact's length once its spaces are joined.
FACT = Field(min_length=1, max_length=FACT_MAX_CHARS * 2)


class NewKey(BaseModel):
    name: str = Field(min_length=1, max_length=255)


class ItemId(BaseModel):
    id: str = ID


class NewFact(BaseModel):
    text: str = FACT


class FactChange(ItemId):
    text: str | None = Field(None, min_length=1, max_length=FACT_MAX_CHARS * 2)
    paused: bool | None = None


def fact_of(typed: str) -> str:
    """A fact as kept: on one line, not empty, not too long (422 otherwise)."""
    fact = one_line(typed)
    if not fact or len(fact) > FACT_MAX_CHARS:
        raise HTTPException(422, f"A fact is one line of 1 to {FACT_MAX_CHARS} characters")
    return fact


def found(changed: bool, what: str) -> dict[str, bool]:
    """A change that named nothing of the caller's is a 404."""
    if not changed:
        raise HTTPException(404, f"No such {what} of yours")
    return {"ok": True}


@dataclass(frozen=True)
class Account:
    """What the account page reads and changes, for the user asking."""

    keys: ApiKeys
    memories: Memories
    team: Team
    # The tokens a memory may take (MEMORY_MAX_TOKENS; 0: memory is off).
    memory_tokens: int

    async def state(self, me: str) -> dict[str, Any]:
        """What the page shows: the keys (never a key itself), whether keys are on, the facts."""
        return {
            "me": me,
            "keys_on": bool((await self.team.defaults())["api_keys"]),
            "keys": [asdict(key) for key in await self.keys.listed(me)],
            "most_keys": self.keys.most,
            "memory_on": self.memory_tokens > 0,
            "memory_tokens": self.memory_tokens,
            "facts": [asdict(fact) for fact in await self.memories.listed(me)],
            "most_facts": MOST_FACTS,
            "fact_max_chars": FACT_MAX_CHARS,
        }

    async def make_key(self, me: str, new: NewKey) -> dict[str, Any]:
        """A new key: the key itself is in this answer only."""
        if not (await self.team.defaults())["api_keys"]:
            raise HTTPException(403, "Personal API keys are turned off here (an admin's choice)")
        made, key, info = await self.keys.make(me, new.name.strip())
        if made is Made.TOO_MANY:
            raise HTTPException(409, f"You hold {self.keys.most} keys already: revoke one first")
        if info is None:
            raise HTTPException(404, "No such user")
        log.info("Account page: %s made the API key %s (%s)", me, info.start, info.name)
        return {"key": key, **asdict(info)}

    async def revoke_key(self, me: str, key: ItemId) -> dict[str, bool]:
        log.info("Account page: %s revoked an API key of theirs (%s)", me, key.id)
        return found(await self.keys.revoke(me, key.id), "key")

    async def add_fact(self, me: str, new: NewFact) -> dict[str, bool]:
        kept = await self.memories.add(me, fact_of(new.text))
        if kept is Kept.TOO_MANY:
            raise HTTPException(409, f"You keep {MOST_FACTS} facts already: delete one first")
        return found(kept is Kept.KEPT, "user")

    async def change_fact(self, me: str, change: FactChange) -> dict[str, bool]:
        text = fact_of(change.text) if change.text is not None else None
        return found(await self.memories.change(me, change.id, text=text, paused=change.paused), "fact")

    async def delete_fact(self, me: str, fact: ItemId) -> dict[str, bool]:
        return found(await self.memories.delete(me, fact.id), "fact")


def install(account: Account) -> None:
    """Serve the routes: each checks its caller first (logged in, the chat's own page), then touches only theirs."""
    me = Annotated[str, Depends(page_user)]
    serve_page_routes(
        PREFIX,
        me,
        {"state": account.state},
        {
            "keys/create": account.make_key,
            "keys/revoke": account.revoke_key,
            "memory/add": account.add_fact,
            "memory/change": account.change_fact,
            "memory/delete": account.delete_fact,
        },
    )
