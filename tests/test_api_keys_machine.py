"""Personal API keys as a state machine (Hypothesis) on one SQLite history shared by two app processes' stores:
whatever keys are made, revoked by their owner or an admin, and users removed, a presented key resolves on both
to its owner exactly while it lives, nobody revokes another's key, and nobody holds more than the limit."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from app.history.accounts import delete_user, set_password
from app.history.api_keys import PREFIX, ApiKeys, Made
from app.history.database import create_engine, upgrade
from app.history.schema import api_keys
from app.history.team import Change
from app.history.writes import Writer

USERS = ("ann", "ben")
MOST = 3


class Keys(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.folder = Path(tempfile.mkdtemp(prefix="keys-"))
        self.engine = create_engine(f"sqlite:///{self.folder / 'chat.db'}")
        upgrade(self.engine)
        for name in USERS:
            set_password(self.engine, name, f"{name}-password")
        self.writers = [Writer(self.engine, 15.0), Writer(self.engine, 15.0)]
        self.replicas = [ApiKeys(writer, MOST) for writer in self.writers]
        self.live: dict[str, tuple[str, str]] = {}  # key -> (owner, id)
        self.dead: list[str] = []  # revoked, or their user removed
        self.removed: set[str] = set()

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coroutine, 15))

    def held(self, user: str) -> list[str]:
        return [key for key, (owner, _) in self.live.items() if owner == user]

    @rule(user=st.sampled_from(USERS), replica=st.integers(0, 1))
    def make(self, user: str, replica: int) -> None:
        made, key, info = self.run(self.replicas[replica].make(user, "script"))
        if user in self.removed:
            assert made is Made.NO_USER
        elif len(self.held(user)) >= MOST:
            assert made is Made.TOO_MANY and not key
        else:
            assert made is Made.MADE and key.startswith(PREFIX) and info is not None
            self.live[key] = (user, info.id)

    def picked(self, pick: int) -> str | None:
        """One of the live keys (None: there are none)."""
        return sorted(self.live)[pick % len(self.live)] if self.live else None

    # Rules pick a key by index rather than by a precondition and a draw: what is drawn never depends on the state,
    # which Hypothesis requires (a state-dependent draw was reported as flaky data generation).
    @rule(pick=st.integers(0, 255), user=st.sampled_from(USERS), replica=st.integers(0, 1))
    def revoke(self, pick: int, user: str, replica: int) -> None:
        if (key := self.picked(pick)) is None:
            return
        owner, key_id = self.live[key]
        revoked = self.run(self.replicas[replica].revoke(user, key_id))
        assert revoked == (owner == user)
        if revoked:
            del self.live[key]
            self.dead.append(key)

    @rule(pick=st.integers(0, 255), replica=st.integers(0, 1))
    def admin_revokes(self, pick: int, replica: int) -> None:
        if (key := self.picked(pick)) is None:
            return
        owner, key_id = self.live.pop(key)
        assert self.run(self.replicas[replica].revoke_any(Change("root", "revoke API key", owner), key_id))
        self.dead.append(key)

    @rule(user=st.sampled_from(USERS))
    def remove_user(self, user: str) -> None:
        with self.engine.begin() as connection:
            delete_user(connection, user)
        self.removed.add(user)
        for key in self.held(user):
            self.live.pop(key)
            self.dead.append(key)

    @rule(replica=st.integers(0, 1), garbled=st.text(max_size=60))
    def present_a_garbled_key(self, replica: int, garbled: str) -> None:
        if garbled not in self.live:
            assert self.run(self.replicas[replica].holder(garbled)) is None

    @invariant()
    def every_replica_answers_live_keys_only(self) -> None:
        for replica in self.replicas:
            for key, (owner, key_id) in self.live.items():
                holder = self.run(replica.holder(key))
                assert holder is not None and (holder.user, holder.key_id) == (owner, key_id)
            for key in self.dead:
                assert self.run(replica.holder(key)) is None

    @invariant()
    def each_user_lists_their_own_within_the_limit(self) -> None:
        for user in USERS:
            listed = {info.id for info in self.run(self.replicas[0].listed(user))}
            assert listed == {key_id for owner, key_id in self.live.values() if owner == user}
            assert len(listed) <= MOST
        with self.engine.connect() as connection:
            stored = connection.execute(sa.select(api_keys.c.digest)).scalars().all()
        assert not {*self.live, *self.dead} & set(stored)  # only hashes are kept

    def teardown(self) -> None:
        for writer in self.writers:
            self.run(writer.close())
        self.loop.close()
        self.engine.dispose()
        shutil.rmtree(self.folder, ignore_errors=True)


Keys.TestCase.settings = settings(max_examples=15, stateful_step_count=15, deadline=None)
test_api_keys_as_a_state_machine = Keys.TestCase
