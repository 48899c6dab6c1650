"""The reassign nemesis and the moving-replica targets, against a stand-in for Kafka's reassignment tool."""
from __future__ import annotations

import json
import random
import re

import pytest

from kchaos.clusters import admin, reassign, tools
from kchaos.clusters.admin import PartitionState
from kchaos.core.config import ConfigError, NemesisConfig, TestConfig
from kchaos.core.protocols import FaultSkipped
from kchaos.nemesis import reassign as nemesis
from kchaos.nemesis.schedule import load_schedule
from kchaos.nemesis.targets import resolve_recorded

LISTED = """Current partition reassignments:
kchaos-0: replicas: 4,2,3,1. adding: 4. removing: 1.
other-1: replicas: 1,2. adding: 2.
kchaos-2: replicas: 1,2,3,4. adding: 4.
"""


class Tool:
    """Four brokers n1..n4 (ids 1..4), every one running; the tool answers from `answers` by its action."""

    nodes = ["n1", "n2", "n3", "n4"]
    controllers = ["n1", "n2", "n3"]
    members = {"n1", "n2", "n3", "n4"}

    def __init__(self, **answers: str):
        self.answers = answers
        self.calls: list[list[str]] = []
        self.plans: list[dict] = []

    def bootstrap(self) -> str:
        return "b:9092"

    def listener(self, node: str) -> str:
        return f"{node}:9092"

    def node_of(self, i: int) -> str | None:
        return f"n{i}" if 1 <= i <= 4 else None

    def id_of(self, node: str) -> int:
        return int(node[1:])

    def is_running(self, node: str) -> bool:
        return True

    def exec(self, node: str, cmd: list[str]) -> tuple[int, str]:
        if cmd[:2] == ["sh", "-c"]:
            self.plans.append(json.loads(re.search(r"printf '%s' '(.*)' >", cmd[2]).group(1)))
        return 0, ""

    def kafka_tool(self, node: str, args: list[str]) -> tuple[int, str]:
        self.calls.append(args)
        action = next(a for a in args if a in ("--execute", "--verify", "--cancel", "--list"))
        return 0, self.answers.get(action[2:], "")


def cfg(throttle: int = 0) -> TestConfig:
    return TestConfig().with_(nemesis=NemesisConfig(names=("reassign",), reassign_throttle=throttle))


@pytest.fixture
def replicas(monkeypatch):
    """Set partition 0's replicas (leader first) as the admin API reports them, and brokers 1..4 registered."""
    monkeypatch.setattr(admin, "registered_brokers", lambda *a, **k: {1, 2, 3, 4})

    def set_(*ids: int) -> None:
        monkeypatch.setattr(admin, "partitions", lambda *a, **k: {0: PartitionState(0, ids[0], ids, ids)})
    return set_


def test_the_leaders_replica_moves_to_the_broker_that_holds_none_or_a_replica_is_added(replicas):
    replicas(1, 2, 3)
    seen = set()
    for pick in range(20):
        tool = Tool(execute="Successfully started partition reassignment for kchaos-0")
        out = nemesis.Reassign(tool, cfg()).begin(["n1"], {"partition": 0, "pick": pick})
        (plan,) = tool.plans
        assert plan == {"version": 1, "partitions": [{"topic": "kchaos", "partition": 0,
                                                      "replicas": [int(n[1:]) for n in out["to"]]}]}
        assert out["from"] == ["n1", "n2", "n3"] and out["adding"] == ["n4"]
        assert out["to"] == (["n4", "n2", "n3"] if out["mode"] == "move" else ["n1", "n2", "n3", "n4"])
        assert out["removing"] == (["n1"] if out["mode"] == "move" else [])
        assert "--additional" in tool.calls[0] and "--throttle" not in tool.calls[0]
        seen.add(out["mode"])
    assert seen == {"move", "grow"}


def test_a_grown_partition_shrinks_back_without_the_target(replicas):
    replicas(1, 2, 3, 4)
    tool = Tool()
    out = nemesis.Reassign(tool, cfg(throttle=20000)).begin(["n2"], {"partition": 0, "pick": 1})
    assert (out["mode"], out["to"], out["removing"]) == ("shrink", ["n1", "n3", "n4"], ["n2"])
    assert tool.calls[0][-3:-2] == ["20000"]


def test_without_a_broker_outside_the_replicas_the_op_is_skipped(replicas, monkeypatch):
    replicas(1, 2, 3)
    tool = Tool()
    monkeypatch.setattr(admin, "registered_brokers", lambda *a, **k: {1, 2, 3})  # n4 is a spare not yet started
    with pytest.raises(FaultSkipped, match="needs more brokers"):
        nemesis.Reassign(tool, cfg()).begin(["n1"], {"partition": 0})


def test_verify_follows_the_reassignments_until_they_complete_and_the_heal_cancels_the_rest(replicas, monkeypatch):
    replicas(1, 2, 3)
    tool = Tool(verify="Status of partition reassignment:\nReassignment of partition kchaos-0 is still in progress.\n")
    r = nemesis.Reassign(tool, cfg())
    r.begin(["n1"], {"partition": 0, "pick": 0})
    assert r.end(["n1"]) == {"reassignments": {"kchaos-0": "still in progress"}}
    monkeypatch.setattr(nemesis, "SETTLE_S", 0.0)
    r.heal()
    assert "--cancel" in tool.calls[-1] and not r.moves.pending
    tool.answers["verify"] = "Reassignment of partition kchaos-0 is completed.\n"
    r.begin(["n1"], {"partition": 0, "pick": 0})
    assert r.end([]) == {"reassignments": {"kchaos-0": "completed"}} and not r.moves.pending


def test_the_replicas_a_reassignment_adds_and_removes_are_targets():
    tool = Tool(list=LISTED)
    assert reassign.moving(tool, "kchaos") == {
        0: reassign.Moving(0, (4, 2, 3, 1), (4,), (1,)), 2: reassign.Moving(2, (1, 2, 3, 4), (4,), ())}
    assert resolve_recorded(tool, "kchaos", {"target": "adding", "pick": 3})[0] == ["n4"]
    assert resolve_recorded(tool, "kchaos", {"target": "removing", "pick": 3})[0] == ["n1"]
    with pytest.raises(FaultSkipped, match="no reassignment of kchaos is removing"):
        resolve_recorded(Tool(list="Current partition reassignments:\n"), "kchaos", {"target": "removing"})


def test_a_failing_tool_skips_the_fault_quoting_it(replicas):
    replicas(1, 2, 3)
    tool = Tool()
    trace = ("Error: some reassignment error\norg.apache.kafka.common.errors.InvalidReplicaAssignmentException: "
             "Unknown broker 9\n\tat org.apache.kafka.tools.reassign.ReassignPartitionsCommand.main(X.java:142)")
    tool.kafka_tool = lambda node, args: (1, trace)  # type: ignore[method-assign]
    with pytest.raises(FaultSkipped, match=r"--execute failed \(1\): org.apache.kafka.common.errors.Invalid"
                                           r"ReplicaAssignmentException: Unknown broker 9$"):
        nemesis.Reassign(tool, cfg()).begin(["n1"], {"partition": 0, "pick": random.Random(1).randrange(9)})


def test_a_throttle_op_rethrottles_the_moves_in_progress_with_their_plan(replicas):
    replicas(1, 2, 3)
    tool = Tool(execute="Successfully started partition reassignment for kchaos-0")
    pkg = nemesis.PACKAGES[0]
    assert pkg.fs == ("reassign", "verify", "throttle")
    nem = pkg.make(tool, cfg(throttle=2000))
    assert nem.invoke({"f": "throttle", "rate": 1_000_000}) == {
        "nodes": [], "rate": 1_000_000, "partitions": [], "refused": 0, "answer": ""}
    assert tool.calls == []  # nothing in progress: the tool is not run
    moved = nem.invoke({"f": "reassign", "target": "leader", "partition": 0, "pick": 0})
    out = nem.invoke({"f": "throttle", "rate": 1_000_000})
    assert out["partitions"] == ["kchaos-0"] and out["answer"].startswith("Successfully started")
    assert tool.calls[-1][tool.calls[-1].index("--throttle") + 1] == "1000000"
    assert "--additional" in tool.calls[-1]
    assert tool.plans[-1] == tool.plans[0] == {"version": 1, "partitions": [
        {"topic": "kchaos", "partition": 0, "replicas": [int(n[1:]) for n in moved["to"]]}]}


def test_the_tools_answer_is_its_own_last_line_not_its_admin_clients_log_lines():
    out = ("Current partition replica assignment\n\n{}\n"
           "[2026-11-30 19:12:02,661] WARN [AdminClient clientId=reassign-partitions-tool] Connection to node -1 "
           "(/172.30.77.11:9092) could not be established. Node may not be available. "
           "(org.apache.kafka.clients.NetworkClient)\n"
           "Successfully started partition reassignment for kchaos-0\n"
           "[2026-11-30 19:12:03,001] WARN [AdminClient clientId=x] Connection to node 1 could not be established. "
           "java.net.ConnectException (org.apache.kafka.clients.NetworkClient)\n")
    assert tools.last_line(out) == "Successfully started partition reassignment for kchaos-0"
    failed = out + "Error: org.apache.kafka.common.errors.InvalidReplicaAssignmentException: Unknown broker 9\n"
    assert tools.error_line(failed).startswith("Error: org.apache.kafka.common.errors.InvalidReplicaAssignment")
    assert tools.last_line("[2026-11-30 19:12:02,661] WARN only a log line\n") == ""


def test_a_throttle_op_retries_while_the_tool_does_not_know_the_broker_it_moves_to(replicas, monkeypatch):
    replicas(1, 2, 3)
    tool = Tool(execute="Successfully started partition reassignment for kchaos-0")
    nem = nemesis.PACKAGES[0].make(tool, cfg(throttle=2000))
    nem.invoke({"f": "reassign", "target": "leader", "partition": 0, "pick": 0})  # to n4, which is then restarted
    answers = iter([(1, "org.apache.kafka.tools.AdminCommandFailedException: Unknown broker id 4")] * 2
                   + [(0, "Successfully started partition reassignment for kchaos-0")])
    tool.kafka_tool = lambda node, args: next(answers)  # type: ignore[method-assign]
    monkeypatch.setattr(nemesis, "POLL_S", 0.02)
    out = nem.invoke({"f": "throttle", "rate": 1_000_000})
    assert (out["refused"], out["answer"]) == (2, "Successfully started partition reassignment for kchaos-0")
    tool.kafka_tool = lambda node, args: (1, "org.apache.kafka.common.errors.TimeoutException: no")  # type: ignore
    with pytest.raises(FaultSkipped, match="TimeoutException"):
        nem.invoke({"f": "throttle", "rate": 1_000_000})


@pytest.mark.parametrize("rate", [None, "fast", 0, -5, True, 1.5])
def test_a_scheduled_throttle_op_without_a_positive_whole_rate_is_a_one_line_error(tmp_path, rate):
    op = {"f": "throttle"} if rate is None else {"f": "throttle", "rate": rate}
    path = tmp_path / "schedule.json"
    path.write_text(json.dumps([{"at": 1, "nemesis": "reassign", "op": op}]))
    with pytest.raises(ConfigError, match=r"entry 0: a throttle op needs rate, a positive number of bytes a second"):
        load_schedule(path, cfg())
    path.write_text(json.dumps([{"at": 1, "nemesis": "reassign", "op": {"f": "throttle", "rate": 10_000_000}}]))
    assert load_schedule(path, cfg())[0].op["rate"] == 10_000_000
