"""graphite_plugin.thread_pool: the gunicorn worker's request threads, the most recently idle
one taking the next request; what gthread uses of an executor (submit's Future, shutdown)."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from graphite_plugin.gunicorn_worker import RequestFirstWorker
from graphite_plugin.thread_pool import LastIdlePool
from tests.paths import REPO_ROOT


def _threads_of_one_at_a_time(pool, jobs: int = 40) -> list[str]:
    """Start every thread of the pool (a burst that holds them all), then run jobs one at a
    time, as a client waiting for each answer sends them: the thread of each."""
    release = threading.Event()
    burst = [pool.submit(release.wait, 10) for _ in range(8)]
    time.sleep(0.2)
    release.set()
    for future in burst:
        assert future.result(timeout=10)
    time.sleep(0.1)  # every thread of the burst idle again
    return [pool.submit(lambda: threading.current_thread().name).result(timeout=10) for _ in range(jobs)]


def test_one_request_at_a_time_is_served_by_one_thread():
    """After a burst started all 8 threads, requests that come one at a time all go to the
    thread that went idle last; the standard executor spreads them over its threads (the
    cold caches this pool avoids), which this test would show."""
    pool = LastIdlePool(8)
    try:
        names = _threads_of_one_at_a_time(pool)
        assert pool.threads == 8
        assert len(set(names)) == 1, names
    finally:
        pool.shutdown(wait=True)
    executor = ThreadPoolExecutor(8)
    try:
        assert len(set(_threads_of_one_at_a_time(executor))) > 1, "the executor hands jobs round its threads"
    finally:
        executor.shutdown(wait=True)


def test_threads_start_only_when_none_is_idle_and_jobs_queue_past_max_workers():
    pool = LastIdlePool(3)
    try:
        assert pool.submit(lambda: 1).result(timeout=10) == 1
        time.sleep(0.1)
        assert pool.submit(lambda: 2).result(timeout=10) == 2
        assert pool.threads == 1, "a second job after the first ended reuses its thread"
        release, started = threading.Event(), []

        def held(i):
            started.append(i)
            release.wait(10)
            return i

        futures = [pool.submit(held, i) for i in range(5)]
        time.sleep(0.2)
        assert pool.threads == 3 and sorted(started) == [0, 1, 2], "3 threads at most; the others wait"
        assert not any(f.done() for f in futures)
        release.set()
        assert [f.result(timeout=10) for f in futures] == [0, 1, 2, 3, 4], "queued jobs run once a thread is free"
    finally:
        pool.shutdown(wait=True)
    assert pool.threads == 0


def test_a_failing_job_fails_its_future_only():
    pool = LastIdlePool(2)
    try:
        failed = pool.submit(lambda: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            failed.result(timeout=10)
        time.sleep(0.1)  # its thread idle again (the Future is set just before)
        assert pool.submit(lambda: "next").result(timeout=10) == "next"
        assert pool.threads == 1
    finally:
        pool.shutdown()


def test_shutdown_ends_idle_threads_lets_busy_ones_finish_and_refuses_new_jobs():
    pool = LastIdlePool(4)
    release = threading.Event()
    busy = pool.submit(lambda: release.wait(10) and "finished")
    pool.submit(lambda: None).result(timeout=10)
    time.sleep(0.1)
    assert pool.threads == 2
    pool.shutdown(wait=False)
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(lambda: None)
    deadline = time.monotonic() + 5
    while pool.threads > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool.threads == 1, "the idle thread ended, the busy one goes on"
    release.set()
    assert busy.result(timeout=10) == "finished"
    pool.shutdown(wait=True)
    assert pool.threads == 0


def test_shutdown_can_cancel_queued_jobs():
    pool = LastIdlePool(1)
    release = threading.Event()
    running = pool.submit(release.wait, 10)
    queued = pool.submit(lambda: "never")
    time.sleep(0.1)
    pool.shutdown(wait=False, cancel_futures=True)
    release.set()
    assert running.result(timeout=10) is True
    assert queued.cancelled()
    pool.shutdown(wait=True)
    assert pool.threads == 0


def test_max_workers_must_be_positive():
    with pytest.raises(ValueError, match="at least 1, got 0"):
        LastIdlePool(0)


def test_the_worker_serves_requests_from_this_pool():
    worker = RequestFirstWorker.__new__(RequestFirstWorker)
    worker.cfg = type("Cfg", (), {"threads": 5})()
    pool = worker.get_thread_pool()
    assert isinstance(pool, LastIdlePool) and pool.max_workers == 5


EXIT_WITHOUT_SHUTDOWN = """
import sys, threading, time
from graphite_plugin.thread_pool import LastIdlePool

pool = LastIdlePool(4)
assert pool.submit(lambda: 1).result(timeout=10) == 1
release = threading.Event()
held = pool.submit(release.wait, 5)  # a second thread, busy
time.sleep(0.1)

def slow_job():
    time.sleep(0.5)
    with open(sys.argv[1], "w") as done:
        done.write("finished")

pool.submit(slow_job)  # a third thread, busy as the interpreter exits
release.set()
print(pool.threads)
"""


def test_the_interpreter_exits_without_shutdown_once_busy_jobs_are_done(tmp_path):
    """A worker that leaves without calling shutdown() (an exception out of its loop): the
    idle threads end as the interpreter exits, as the executor's do, instead of holding the
    process forever; a job still running finishes first."""
    marker = tmp_path / "done"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", EXIT_WITHOUT_SHUTDOWN, str(marker)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) >= 2, "an idle thread, and a busy one, as the interpreter exits"
    assert marker.read_text() == "finished", "the busy job ran to its end"
    assert time.monotonic() - started < 30
