"""Worker threads the process never waits for at exit: a database or disk that hangs cannot keep it running."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

# A job: its future, and the call to make.
Job = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class DaemonThreads(Executor):
    """A fixed pool of daemon threads (ThreadPoolExecutor's are joined at exit, hung or not)."""

    def __init__(self, count: int, name: str) -> None:
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{n}", daemon=True) for n in range(count)]
        self._started = self._stopped = False
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Run the call in one of the threads."""
        with self._lock:
            if self._stopped:
                raise RuntimeError("these threads were stopped")
            if not self._started:
                self._started = True
                for thread in self._threads:
                    thread.start()
        future: Future[Any] = Future()
        self._jobs.put((future, fn, args, kwargs))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Let the threads end once their current job is done (waiting for them only if asked)."""
        with self._lock:
            self._stopped = True
        for _ in self._threads:
            self._jobs.put(None)
        if wait and self._started:
            for thread in self._threads:
                thread.join()

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, fn, args, kwargs = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as error:  # handed to whoever waits on the future
                future.set_exception(error)
