"""The app assembled from its settings by one function: the chat, its history, its guards, in a written order."""

from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass

from starlette.middleware import Middleware

from app import metrics
from app.account import api as account_api
from app.account import page as account_page
from app.account.api import Account
from app.admin import api as admin_api
from app.admin import page as admin_page
from app.admin.access import Gate
from app.admin.api import Admin
from app.api import routes as api_routes
from app.api.kept import Keeper
from app.api.routes import Api
from app.chat.answering import Answering
from app.chat.backend import Backend, servers_now
from app.chat.pace import Pace
from app.chat.quotas import Quotas
from app.chats import api as chats_api
from app.chats import page as chats_page
from app.chats.api import Chats
from app.chats.importing import Importing
from app.config import Settings
from app.documents.embeddings import Embedder
from app.documents.library import Library
from app.errors import HistoryUnavailable
from app.history.accounts import Login, auth_secret
from app.history.api_keys import ApiKeys
from app.history.identities import Identities
from app.history.imports import Imports
from app.history.memories import Memories
from app.history.projects import Projects
from app.history.replicas import Replicas
from app.history.store import ChatStore
from app.history.usage import Usage
from app.i18n import text
from app.identity.claims import LOCAL_USER, ProxyHeaders
from app.local_link import KEY_VARIABLE
from app.page import seam, sign_on
from app.page.chat_history import History, keep_history
from app.page.lifecycle import tab_language
from app.page.pipeline import Pipeline
from app.presets.store import PresetStore
from app.web import guards, local_key, origins, proxies, readiness, share_links, uploads
from app.web.login_sessions import SessionGate, Sessions, watch_logins
from app.web.protection import body_limit, security_headers
from app.web.proxies import ProxyGate


@dataclass(frozen=True)
class App:
    """What the callbacks hand their work to."""

    settings: Settings
    backend: Backend
    history: History
    pipeline: Pipeline
    # The users' own presets (None with the history off: built-in ones only).
    preset_store: PresetStore | None
    # Login sessions the server ends (None with the history off: nobody logs in).
    sessions: Sessions | None
    # The users' documents (None with the history off).
    library: Library | None
    # Who is an admin (None with the history off: nobody is).
    gate: Gate | None
    # This process's heartbeat for the admin page's health (None with the history off).
    replicas: Replicas | None
    # The users' projects and the filing of their chats (None with the history off).
    projects: Projects | None
    # The users' memories for "remember …" in a chat (None with the history or the memory off).
    memories: Memories | None

    async def is_admin(self, user: str | None) -> bool:
        """Whether the tab's user may open the admin page."""
        return self.gate is not None and user is not None and await self.gate.is_admin(user)

    async def chat_defaults(self) -> tuple[Settings, frozenset[str]]:
        """What chats start from, with the admins' defaults for everyone: the system prompt, the presets hidden."""
        team = self.history.team
        if team is None:
            return self.settings, frozenset()
        try:
            defaults = await team.defaults()
        except HistoryUnavailable:  # the database is away: the app's own settings
            return self.settings, frozenset()
        prompt = defaults["system_prompt"]
        settings = self.settings.model_copy(update={"system_prompt": prompt}) if prompt else self.settings
        return settings, frozenset(defaults["hidden_presets"])

    def language(self, browser: str | None = None) -> str:
        """'zh' or 'en': the setting, else the browser's (this tab's by default)."""
        return tab_language(self.settings.language, browser)


def build(settings: Settings) -> App:
    """Register the app's data layer, login, routes and middleware with Chainlit (once, before it serves)."""
    seam.own_files_directory()
    seam.no_blocking_sleeps()
    seam.plain_action_dicts()
    seam.emits_sent_by_the_emitter()
    seam.packets_in_orjson()
    seam.frames_counted()
    seam.config_without_profiles()
    backend, answering = Backend(settings), Answering()
    history = keep_history(settings, lambda: text(tab_language(settings.language), "history_unavailable"), answering)
    store = history.store
    sessions = None
    if store is not None:
        secret = auth_secret(settings.data_dir)
        sessions = watch_logins(settings, store, passwords=history.login is Login.PASSWORD, secret=secret)
    key_gate = None
    if history.login is Login.LOCAL and sessions is not None:
        key = local_key.LocalKey(os.environ.get(KEY_VARIABLE, ""), f"local_key_{settings.chat_port}")
        key_gate = local_key.install(key, sessions, settings.language)
    if history.team is not None:
        sign_on.install(settings, history.team)
    proxies.announce(settings)
    guards.install(store)
    share_links.install(settings)
    uploads.install(settings)
    readiness.install(backend, store)
    check = origins.lock(settings.origins)
    # The HTTP layers around Chainlit, outermost first: a request for a foreign Host is refused before anything
    # reads it, another site's write next, then a body too big before the session gate (or Chainlit) reads it.
    # Behind a sign-in proxy, its address is checked before anything else reads the request.
    seam.surround(
        *(
            [Middleware(ProxyGate, proxies=settings.proxy_networks, believed=ProxyHeaders.of(settings))]
            if settings.proxy_networks
            else []
        ),
        Middleware(origins.HostCheck, allowed_hosts=settings.hosts),
        *([Middleware(origins.ForeignWriteCheck, check=check)] if check is not None else []),
        body_limit(settings),
        *([Middleware(SessionGate, sessions=sessions)] if sessions is not None else []),
    )
    seam.innermost(security_headers(settings))  # inside Chainlit's gzip: it rewrites the page
    if key_gate is not None:
        seam.innermost(key_gate)  # inside the security headers: its page gets them too
    quotas = Quotas(
        settings.answers_per_user,
        settings.messages_per_minute,
        settings.daily_token_quota,
        Usage(store.writer) if store is not None else None,  # usage counted only with a history to keep it in
        # Exemption follows the login mode, never a name alone: only the local user of a chat without users.
        frozenset({LOCAL_USER}) if history.login is Login.LOCAL and not settings.limit_local_user else frozenset(),
        history.team,  # limits an admin set for one user, read at each of their messages
    )
    pace = Pace(settings.stream_interval_ms / 1000, settings.stream_updates_per_second)
    limits = uploads.limits(settings)
    library = documents_of(settings, store, backend)
    memories = Memories(store.writer) if store is not None else None
    keys = ApiKeys(store.writer, settings.api_keys_per_user) if store is not None else None
    pipeline = Pipeline(
        backend,
        pace,
        history,
        quotas,
        limits,
        answering,
        settings.context_low_water,
        library,
        settings.document_share,
        settings.document_tokens,
        settings.answer_checkpoint_seconds,
        memories,
        settings.memory_max_tokens,
    )
    metrics.serve("127.0.0.1", settings.metrics_port)
    metrics.watch_model_servers(functools.partial(servers_now, settings))
    if store is None:
        seam.turn_off_favourites()  # favourite prompts are kept in the history
    # One INFO line per HTTP request to vLLM drowns the log; failures are still logged.
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    preset_store = PresetStore(store.writer) if store is not None else None
    gate = replicas = None
    if store is not None and history.team is not None and keys is not None:
        gate = Gate(history.team, local_admin=history.login is Login.LOCAL)
        replicas = Replicas(store.writer)
        identities = Identities(store.writer)
        admin = Admin(gate, history.team, settings, backend, store, quotas, replicas, sessions, identities, keys)
        admin_api.install(admin)
        admin_page.install(gate, settings.language)
        api_routes.install(Api(settings, backend, quotas, answering, keys, history.team, Keeper(store)))
    projects = Projects(store.writer) if store is not None else None
    if store is not None and projects is not None and gate is not None and memories is not None and keys is not None:
        importing = Importing(Imports(store.writer), settings.import_max_mb * 1_000_000, settings.language)
        chats_api.install(Chats(projects, store, library), importing)
        chats_page.install(settings.language, gate.is_admin, settings.import_max_mb)
        account_api.install(Account(keys, memories, gate.team, settings.memory_max_tokens))
        account_page.install(settings.language, gate.is_admin)
    # With the memory off (MEMORY_MAX_TOKENS=0) a chat offers nothing to remember: "remember …" is a question then.
    offered_memories = memories if settings.memory_max_tokens > 0 else None
    return App(
        settings,
        backend,
        history,
        pipeline,
        preset_store,
        sessions,
        library,
        gate,
        replicas,
        projects,
        offered_memories,
    )


def documents_of(settings: Settings, store: ChatStore | None, backend: Backend) -> Library | None:
    """The users' documents, kept in the history's database (None without one), their passages counted by the
    model server's tokenizer."""
    if store is None:
        return None
    embedder = None
    if settings.embeddings_url.strip():
        key = settings.embeddings_api_key.get_secret_value()
        embedder = Embedder(settings.embeddings_url.strip(), settings.embeddings_model, key, settings.request_timeout)
    most_bytes, per_chat = settings.library_max_mb * 1_000_000, settings.documents_per_chat
    count = backend.count_text_tokens
    return Library(store.writer, most_bytes=most_bytes, per_chat=per_chat, embedder=embedder, count=count)
