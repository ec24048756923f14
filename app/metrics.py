"""What operators see (Prometheus): sessions, answers, first-token times, speeds, refusals, history writes.

Served on a port of its own (METRICS_PORT, loopback), not on the chat's public address.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, start_http_server
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

SESSIONS = Gauge("chat_sessions_open", "Chat sessions (tabs) open in this app process")
ANSWERS = Counter("chat_answers", "Answers by how they ended", ["ending"])
FIRST_TOKEN = Histogram(
    "chat_time_to_first_token_seconds",
    "From a message to its answer's first token",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32),
)
SPEED = Histogram(
    "chat_answer_tokens_per_second",
    "Tokens per second while an answer streamed",
    buckets=(1, 2, 5, 10, 20, 40, 80, 160, 320),
)
PROMPT_TOKENS = Counter(
    "chat_prompt_tokens",
    "Prompt tokens of answers, by whether the model server found them in its cache (cached) or computed them "
    "(computed); answers whose server says nothing of its cache count as computed",
    ["source"],
)
REFUSALS = Counter(
    "chat_refusals",
    "Requests refused, by reason: busy, empty_message, answers_at_once, too_many_messages, quota_used, "
    "message_too_long, origin, host, login_throttled, body_too_large, ended_session, too_many_files, file_* "
    "(an attached file refused), admin (the admin page refused), sign_on (a sign-on header from elsewhere), "
    "local_key (the local user asked for without this start's key)",
    ["reason"],
)
HISTORY_WRITE_FAILURES = Counter("chat_history_write_failures", "History writes that failed, by what they were for")
HISTORY_COMMIT = Histogram(
    "chat_history_commit_seconds",
    "One batch of history writes, from its start to its commit",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5),
)


HISTORY_WAITING = Gauge("chat_history_writes_waiting", "Writes in the journal, waiting for the history database")
HISTORY_WAITING_AGE = Gauge(
    "chat_history_oldest_waiting_write_seconds", "How long the oldest write in the journal has waited (0: none waits)"
)
HISTORY_HELD = Gauge(
    "chat_history_chats_held",
    "Chats whose journaled writes the database refuses for a reason it does not say is the write's (permissions, a "
    "missing table): they wait and are retried; an operator should look",
)
HISTORY_WRITES_REJECTED = Counter(
    "chat_history_writes_rejected",
    "Writes the database refused for good (bad data, a broken constraint): set aside in the journal's folder",
)


def watch_waiting(waiting: Callable[[], tuple[int, float]], held: Callable[[], int]) -> None:
    """Report the journal's waiting writes, the oldest one's age and the chats held back, read at each scrape."""
    HISTORY_WAITING.set_function(lambda: waiting()[0])
    HISTORY_WAITING_AGE.set_function(lambda: waiting()[1])
    HISTORY_HELD.set_function(held)


class ModelServers(Collector):
    """The vLLM servers behind the router, answering or not, asked at each scrape (no series without a router)."""

    def __init__(self) -> None:
        self.count: Callable[[], tuple[int, int] | None] = lambda: None

    def describe(self) -> list[Metric]:
        return []  # registered without a scrape (which would ask the router before the app runs)

    def collect(self) -> Iterator[Metric]:
        counted = self.count()
        if counted is None:
            return
        answering, total = counted
        servers = GaugeMetricFamily(
            "chat_model_servers",
            "vLLM servers behind the router, by whether they answer its health checks",
            labels=["state"],
        )
        servers.add_metric(["answering"], answering)
        servers.add_metric(["not_answering"], max(total - answering, 0))
        yield servers


MODEL_SERVERS = ModelServers()
REGISTRY.register(MODEL_SERVERS)


def watch_model_servers(count: Callable[[], tuple[int, int] | None]) -> None:
    """Report the router's servers (answering, all) at each scrape; count says None when there is no router."""
    MODEL_SERVERS.count = count


def serve(host: str, port: int) -> None:
    """Serve the metrics on host:port (0: not at all)."""
    if port:
        start_http_server(port, addr=host)
        log.info("Metrics: http://%s:%d/metrics", host, port)
