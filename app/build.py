"""The app assembled from its settings by one function: the chat, its history, its guards, in a written order."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from starlette.middleware import Middleware

from app import metrics
from app.chat.answering import Answering
from app.chat.backend import Backend
from app.chat.quotas import Quotas
from app.config import Settings
from app.documents.embeddings import Embedder
from app.documents.library import Library
from app.history.accounts import LOCAL_USER, Login, auth_secret
from app.history.store import ChatStore
from app.history.usage import Usage
from app.i18n import text
from app.page import seam
from app.page.chat_history import History, keep_history
from app.page.lifecycle import tab_language
from app.page.pipeline import Pipeline
from app.presets.store import PresetStore
from app.web import guards, origins, readiness, share_links, uploads
from app.web.login_sessions import SessionGate, Sessions, watch_logins
from app.web.protection import body_limit, security_headers


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

    def language(self, browser: str | None = None) -> str:
        """'zh' or 'en': the setting, else the browser's (this tab's by default)."""
        return tab_language(self.settings.language, browser)


def build(settings: Settings) -> App:
    """Register the app's data layer, login, routes and middleware with Chainlit (once, before it serves)."""
    seam.own_files_directory()
    seam.no_blocking_sleeps()
    backend, answering = Backend(settings), Answering()
    history = keep_history(settings, lambda: text(tab_language(settings.language), "history_unavailable"), answering)
    store = history.store
    sessions = None
    if store is not None:
        secret = auth_secret(settings.data_dir)
        sessions = watch_logins(settings, store, passwords=history.login is Login.PASSWORD, secret=secret)
    guards.install(store)
    share_links.install(settings)
    uploads.install(settings)
    readiness.install(backend, store)
    check = origins.lock(settings.origins)
    # The HTTP layers around Chainlit, outermost first: a request for a foreign Host is refused before anything
    # reads it, another site's write next, then a body too big before the session gate (or Chainlit) reads it.
    seam.surround(
        Middleware(origins.HostCheck, allowed_hosts=settings.hosts),
        *([Middleware(origins.ForeignWriteCheck, check=check)] if check is not None else []),
        body_limit(settings),
        *([Middleware(SessionGate, sessions=sessions)] if sessions is not None else []),
    )
    seam.innermost(security_headers(settings))  # inside Chainlit's gzip: it rewrites the page
    quotas = Quotas(
        settings.answers_per_user,
        settings.messages_per_minute,
        settings.daily_token_quota,
        Usage(store.writer) if store is not None else None,  # usage counted only with a history to keep it in
        frozenset() if settings.limit_local_user else frozenset({LOCAL_USER}),
    )
    interval_s = settings.stream_interval_ms / 1000
    limits = uploads.limits(settings)
    library = documents_of(settings, store)
    pipeline = Pipeline(
        backend,
        interval_s,
        history,
        quotas,
        limits,
        answering,
        settings.context_low_water,
        library,
        settings.document_share,
        settings.answer_checkpoint_seconds,
    )
    metrics.serve("127.0.0.1", settings.metrics_port)
    if store is None:
        seam.turn_off_favourites()  # favourite prompts are kept in the history
    # One INFO line per HTTP request to vLLM drowns the log; failures are still logged.
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    preset_store = PresetStore(store.writer) if store is not None else None
    return App(settings, backend, history, pipeline, preset_store, sessions, library)


def documents_of(settings: Settings, store: ChatStore | None) -> Library | None:
    """The users' documents, kept in the history's database (None without one)."""
    if store is None:
        return None
    embedder = None
    if settings.embeddings_url.strip():
        key = settings.embeddings_api_key.get_secret_value()
        embedder = Embedder(settings.embeddings_url.strip(), settings.embeddings_model, key, settings.request_timeout)
    most_bytes, per_chat = settings.library_max_mb * 1_000_000, settings.documents_per_chat
    return Library(store.writer, most_bytes=most_bytes, per_chat=per_chat, embedder=embedder)
