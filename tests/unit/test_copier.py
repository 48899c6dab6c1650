"""The copier's session rules (workloads/copy/copier.py) on a scripted client, whichever library runs it: the ops it
records for a copy, an abort, an unknown commit, a rebalance and a crash; and the Java client's pieces that need
no cluster (its settings, its rebalance events, its JVM answering the copier's steps over the pipe)."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from kchaos.core.config import TestConfig
from kchaos.core.history import History, read_history
from kchaos.harness.cli.main import build_parser
from kchaos.harness.options import config_from_args
from kchaos.workloads.copy.copier import IDLE_POLLS, ClientError, Copier, TxnFailed, _Session
from kchaos.workloads.copy.java_copier import JavaCopierClient, rebalances
from kchaos.workloads.java_client import MAX_POLL_INTERVAL_MS, JavaProcess, group_consumer_props
from kchaos.workloads.rebalance import Rebalance


def cfg(*argv: str) -> TestConfig:
    return config_from_args(build_parser().parse_args(["run", "--seed", "9", "--workload", "copy",
                                                       "--partitions", "2", *argv]))


class Script:
    """A CopierClient that replays `polls` and fails the transaction steps it is told to; it records its calls."""

    def __init__(self, polls: list[Any], produce: Exception | None = None, commit: Exception | None = None,
                 crash: threading.Event | None = None):
        self.polls, self.produce_error, self.commit_error, self.crash = list(polls), produce, commit, crash
        self.calls: list[str] = []

    def init(self, txn_id: str) -> None:
        self.calls.append(f"init {txn_id}")

    def subscribe(self, topic: str) -> None:
        self.calls.append(f"subscribe {topic}")

    def poll(self, max_records: int, timeout: float) -> tuple[list[list[int]], list[Rebalance]]:
        self.calls.append("poll")
        if not self.polls:
            raise AssertionError("polled past the script")
        step = self.polls.pop(0)
        if isinstance(step, Exception):
            raise step
        return step

    def produce(self, topic: str, sent: list[list[int]]) -> None:
        self.calls.append(f"produce {sent}")
        if self.crash is not None:
            self.crash.set()
        if self.produce_error:
            raise self.produce_error

    def commit(self) -> list[list[int]]:
        self.calls.append("commit")
        if self.commit_error:
            raise self.commit_error
        return [[0, 2]]

    def rewind(self) -> list[list[int]]:
        self.calls.append("rewind")
        return [[0, -2]]

    def close(self) -> None:
        self.calls.append("close")

    def abandon(self) -> None:
        self.calls.append("abandon")

    def close_abandoned(self) -> None:
        self.calls.append("close_abandoned")


ASSIGN = Rebalance("assign", [0, 1], 3)


def session(tmp_path: Path, client: Script, crashed: threading.Event | None = None) -> list[dict]:
    """Run one session of slot 0 until it ends or its script is played out; return the copier's completions."""
    h = History(tmp_path / "h.jsonl")
    copier = Copier(cfg(), h, 0, "kchaos-in", 0.0, lambda *a: None, lambda slot: client)
    try:
        _Session(copier, after_crash=False).run(lambda: not client.polls, crashed or threading.Event())
    finally:
        h.close()
    assert copier.abandoned == ([client] if crashed is not None and crashed.is_set() else [])
    return [o for o in read_history(tmp_path / "h.jsonl") if o["type"] != "invoke"]


def test_a_copy_commits_its_batch_with_its_offsets_and_generation(tmp_path):
    client = Script([([], [ASSIGN]), ([[0, 0, 0], [1, 0, 1]], [])])
    ops = session(tmp_path, client)
    assert [(o["f"], o["type"]) for o in ops] == [("init", "ok"), ("subscribe", "ok"), ("assign", "ok"),
                                                  ("copy", "ok")]
    assert ops[2]["partitions"] == [0, 1] and ops[2]["generation"] == 3
    copy = ops[3]
    assert copy["value"] == [[0, 0, 0], [1, 0, 1]] and copy["sent"] == [[0, 0], [1, 1]]
    assert copy["offsets"] == [[0, 2]] and copy["generation"] == 3
    assert client.calls == ["init kchaos-9-copy-0", "subscribe kchaos-in", "poll", "poll",
                            "produce [[0, 0], [1, 1]]", "commit", "close"]


def test_a_batch_polled_across_a_rebalance_is_not_copied_but_rewound(tmp_path):
    lost = Rebalance("revoke", [1], 3, lost=True)
    ops = session(tmp_path, Script([([[1, 5, 7]], [lost])]))
    assert [(o["f"], o["type"]) for o in ops][2:] == [("revoke", "ok"), ("rewind", "ok")]
    assert ops[2]["lost"] is True and ops[3]["offsets"] == [[0, -2]]


@pytest.mark.parametrize("error, type_, then", [
    (TxnFailed("aborted", committing=False, aborted=True), "fail", ["rewind", "close"]),
    (TxnFailed("fenced", committing=False, aborted=False), "fail", ["close"]),
    (TxnFailed("commit timed out", committing=True, aborted=False), "info", ["close"]),
    (TxnFailed("commit failed, aborted", committing=True, aborted=True), "fail", ["rewind", "close"]),
])
def test_a_failed_commit_is_fail_when_certainly_not_committed_else_info(tmp_path, error, type_, then):
    client = Script([([[0, 0, 4]], [])], commit=error)
    ops = session(tmp_path, client)
    copy = next(o for o in ops if o["f"] == "copy")
    assert copy["type"] == type_ and copy["error"] == str(error)
    assert client.calls[client.calls.index("commit") + 1:] == then  # no rewind: the session ends


def test_a_crash_after_producing_leaves_the_transaction_open_and_abandons_the_clients(tmp_path):
    crashed = threading.Event()
    client = Script([([[0, 0, 4]], [])], crash=crashed)
    ops = session(tmp_path, client, crashed)
    copy = ops[-1]
    assert copy["f"] == "copy" and copy["type"] == "fail" and "crashed (crash-client)" in copy["error"]
    assert client.calls[-2:] == ["produce [[0, 4]]", "abandon"]  # no commit, no abort, no close


def test_a_pending_crash_waits_through_a_rebalance_for_the_next_batch(tmp_path):
    crashed = threading.Event()
    crashed.set()
    client = Script([([], [ASSIGN]), ([[0, 0, 4]], [Rebalance("revoke", [1], 3)]), ([], []), ([[0, 0, 4]], [])])
    ops = session(tmp_path, client, crashed)
    assert [(o["f"], o["type"]) for o in ops] == [("init", "ok"), ("subscribe", "ok"), ("assign", "ok"),
                                                  ("revoke", "ok"), ("rewind", "ok"), ("copy", "fail")]
    assert "crashed (crash-client)" in ops[-1]["error"] and client.calls[-1] == "abandon"


def test_a_pending_crash_lands_between_transactions_once_the_polls_find_nothing(tmp_path):
    crashed = threading.Event()
    crashed.set()
    client = Script([([], [])] * IDLE_POLLS + [([[0, 0, 4]], [])])
    ops = session(tmp_path, client, crashed)
    assert [o["f"] for o in ops] == ["init", "subscribe"]
    assert client.calls[-2:] == ["poll", "abandon"] and len(client.polls) == 1


def test_a_failed_poll_or_init_is_retried(tmp_path, monkeypatch):
    monkeypatch.setattr("kchaos.workloads.copy.copier.time.sleep", lambda s: None)
    tries = iter([ClientError("coordinator not available"), None])

    class FlakyInit(Script):
        def init(self, txn_id: str) -> None:
            super().init(txn_id)
            if (e := next(tries)) is not None:
                raise e

    ops = session(tmp_path, FlakyInit([ClientError("poll broke"), ([], [])]))
    assert [(o["f"], o["type"]) for o in ops] == [("init", "fail"), ("init", "ok"), ("subscribe", "ok")]
    assert ops[0]["error"] == "coordinator not available"


# --- the Java client's pieces ---------------------------------------------------------------------------------

def test_the_java_copier_is_a_classic_group_member_that_polls_a_transaction_at_a_time():
    props = group_consumer_props("b:9092", "copy1", "kchaos-9-copy", 25, 10000)
    assert props["group.id"] == "kchaos-9-copy" and props["client.id"] == "copy1"
    assert props["isolation.level"] == "read_committed" and props["enable.auto.commit"] == "false"
    assert props["max.poll.records"] == "25" and props["group.protocol"] == "classic"
    assert props["max.poll.interval.ms"] == str(MAX_POLL_INTERVAL_MS)
    assert all(isinstance(v, str) for v in props.values())


def test_the_jvm_s_rebalance_events_become_the_session_s():
    assert rebalances([{"f": "assign", "partitions": [2, 0], "generation": 4},
                       {"f": "revoke", "partitions": [], "generation": 4, "lost": True}]) == [
        Rebalance("assign", [0, 2], 4), Rebalance("revoke", [], 4, lost=True)]


def test_the_jvm_answers_every_copier_step_on_its_pipe(program):
    """Against a loopback port nothing listens on: open succeeds, initTransactions times out and says so, a poll
    of a consumer never subscribed is an error the session logs, and close and abandon answer."""
    c = cfg("--client", "java", "--delivery-timeout-ms", "1500", "--request-timeout-ms", "1000")
    jvm = JavaProcess(program)
    try:
        client = JavaCopierClient(c, "127.0.0.1:1", 0, "kchaos-in", jvm=jvm)
        with pytest.raises(ClientError, match="Timeout"):
            client.init("kchaos-9-copy-0")
        with pytest.raises(ClientError, match="not subscribed"):
            client.poll(10, 0.1)
        with pytest.raises(TxnFailed, match="no producer") as e:
            client.produce("kchaos", [[0, 1]])
        assert not e.value.committing and not e.value.aborted
        client.abandon()
        again = JavaCopierClient(c, "127.0.0.1:1", 0, "kchaos-in", jvm=jvm)  # the slot's next session
        again.close()
    finally:
        jvm.close()
    assert jvm.proc.returncode == 0
