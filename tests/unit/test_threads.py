"""Waiting for a workload's client threads: one deadline for all of them, and stuck threads named."""
import logging
import threading
import time

from kchaos.workloads.threads import join_all


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
