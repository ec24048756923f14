"""The store as Chainlit's data layer: a tab's messages and elements are held until its first message."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.history.store import ChatStore
from app.page.seam import held_until_first_message

if TYPE_CHECKING:
    from chainlit.element import Element
    from chainlit.step import StepDict


class TabStore(ChatStore):
    """ChatStore, with the writes Chainlit makes for a tab held back until it has a chat (a greeting makes none)."""

    @held_until_first_message
    async def create_element(self, element: Element) -> None:
        await super().create_element(element)

    @held_until_first_message
    async def delete_element(self, element_id: str, thread_id: str | None = None) -> None:
        await super().delete_element(element_id, thread_id)

    @held_until_first_message
    async def create_step(self, step_dict: StepDict) -> None:
        await super().create_step(step_dict)

    @held_until_first_message
    async def update_step(self, step_dict: StepDict) -> None:
        await super().update_step(step_dict)

    @held_until_first_message
    async def delete_step(self, step_id: str) -> None:
        await super().delete_step(step_id)
