"""Waiting for a workload's client threads: one deadline for all of them, no wait for one stuck in a client call
past its own timeout, and stuck threads named."""
import logging
import threading
import time

from kchaos.workloads import threads
from kchaos.workloads.threads import join_all, timed


def test_stuck_threads_share_one_deadline_and_are_named(caplog):
    release = threading.Event()
    stuck = [threading.Thread(target=release.wait, name=f"stuck-{i}", daemon=True) for i in range(3)]
    done = threading.Thread(target=lambda: None, name="done", daemon=True)
    for t in (*stuck, done):
        t.start()
    began = time.monotonic()
    with caplog.at_level(logging.WARNING):
        alive = join_all([*stuck, done], 0.5, logging.getLogger("t"))
    waited = time.monotonic() - began
    release.set()
    assert alive == stuck
    assert 0.5 <= waited < 1.2, waited  # not 0.5 s per stuck thread
    assert "stuck-0" in caplog.text and "stuck-2" in caplog.text and "done" not in caplog.text.split("behind")[1]


def test_threads_that_end_are_not_waited_for_longer():
    t = threading.Thread(target=time.sleep, args=(0.1,), daemon=True)
    t.start()
    began = time.monotonic()
    assert join_all([t], 30, logging.getLogger("t")) == []
    assert time.monotonic() - began < 5


def test_a_thread_stuck_in_a_client_call_past_its_timeout_is_not_waited_for(caplog, monkeypatch):
    monkeypatch.setattr(threads, "GRACE_S", 0.2)
    release = threading.Event()

    def send_offsets_to_transaction(timeout: float) -> None:  # a client call that ignores its timeout
        release.wait()

    def stuck() -> None:
        timed(0.1, send_offsets_to_transaction)

    def commit_transaction(timeout: float) -> None:  # slow, but within its timeout
        time.sleep(1)

    def slow_but_in_time() -> None:
        timed(60, commit_transaction)

    ts = [threading.Thread(target=f, name=f.__name__, daemon=True) for f in (stuck, slow_but_in_time)]
    for t in ts:
        t.start()
    began = time.monotonic()
    with caplog.at_level(logging.WARNING):
        alive = join_all(ts, 120, logging.getLogger("t"))
    waited = time.monotonic() - began
    release.set()
    assert alive == ts[:1], "the call still within its timeout is waited for; the one past it is not"
    assert waited < 60, waited  # far less than the 120 s every thread may take
    assert "stuck in send_offsets_to_transaction" in caplog.text and "past its 0.1 s timeout" in caplog.text


def test_a_thread_between_calls_or_within_its_calls_timeout_is_never_overdue():
    inside, release = threading.Event(), threading.Event()

    def flush(timeout: float) -> None:
        inside.set()
        release.wait()

    def run() -> None:
        timed(30, flush)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    inside.wait()
    assert threads.overdue(t) is None
    assert threads.overdue(t, now=time.monotonic() + 30 + threads.GRACE_S + 1).startswith("flush, ")
    release.set()
    t.join()
    assert threads.overdue(t, now=time.monotonic() + 1000) is None
