"""The gunicorn worker's request threads: the most recently idle thread takes the next request.

gthread's pool (concurrent.futures.ThreadPoolExecutor) hands each request to whichever idle
thread its queue wakes, so one-at-a-time requests go round all 8 threads of a worker, and
each finds its own SQLite connection (its page cache) and its CPU caches cold: a small find
or tag read cost about a quarter more CPU than when one thread serves them in turn (issue 36).
`LastIdlePool` gives a request to the thread that went idle last (a stack of idle
threads, each woken by its own lock), starts a thread only when none is idle (up to
`max_workers`, as the executor does) and queues requests when every thread is busy. It
offers what gthread uses of the executor: submit() returning a Future, shutdown(); and, as
the executor does, at the interpreter's exit its idle threads end and busy ones finish
their job (a worker that leaves without calling shutdown() neither hangs nor cuts a request).
"""
from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable


class _Idle:
    """An idle thread's wake-up: its lock, released with the job it is given (None: exit)."""

    __slots__ = ("lock", "job")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lock.acquire()
        self.job: tuple | None = None


class LastIdlePool:
    """A thread pool whose most recently idle thread takes the next job (see module docstring)."""

    def __init__(self, max_workers: int, name: str = "request"):
        if max_workers <= 0:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        self.max_workers = max_workers
        self._name = name
        self._lock = threading.Lock()
        self._idle: list[_Idle] = []  # a stack: the last one went idle last
        self._queued: deque[tuple] = deque()  # jobs waiting for a thread (every thread busy)
        self._threads: set[threading.Thread] = set()  # started, not yet ended
        self._shut_down = False
        # what concurrent.futures registers for its executors: called as the interpreter
        # exits, before it waits for non-daemon threads (idle ones would wait forever)
        threading._register_atexit(self.shutdown, False)

    @property
    def threads(self) -> int:
        """Threads started and not yet ended."""
        return len(self._threads)

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future:
        """Run fn(*args) on a thread; its Future. RuntimeError after shutdown()."""
        future: Future = Future()
        job = (future, fn, args)
        with self._lock:
            if self._shut_down:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if self._idle:
                idle = self._idle.pop()
                idle.job = job
                idle.lock.release()
            elif len(self._threads) < self.max_workers:
                thread = threading.Thread(target=self._work, args=(job,), name=f"{self._name}-{len(self._threads) + 1}")
                self._threads.add(thread)
                try:
                    thread.start()
                except BaseException:
                    self._threads.discard(thread)
                    raise
            else:
                self._queued.append(job)
        return future

    def _work(self, job: tuple | None) -> None:
        idle = _Idle()
        while job is not None:
            future, fn, args = job
            job = None
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args)
                except BaseException as exc:  # noqa: BLE001 - handed to the Future, as the executor does
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, fn, args
            with self._lock:
                if self._queued:
                    job = self._queued.popleft()
                    continue
                if self._shut_down:
                    break
                self._idle.append(idle)
            idle.lock.acquire()  # until submit() gives a job, or shutdown() None
            job = idle.job
            idle.job = None
        with self._lock:
            self._threads.discard(threading.current_thread())

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No new jobs; idle threads end, busy ones after their job (and the queued jobs,
        unless cancel_futures). With `wait`, returns once every thread has ended."""
        with self._lock:
            self._shut_down = True
            if cancel_futures:
                while self._queued:
                    self._queued.popleft()[0].cancel()
            idle, self._idle = self._idle, []
        for thread in idle:
            thread.job = None
            thread.lock.release()
        if wait:
            with self._lock:
                threads = list(self._threads)
            for thread in threads:
                if thread is not threading.current_thread():
                    thread.join()
