"""A dynamic KRaft quorum (KIP-853): its layout and format arguments, the remove-controller nemesis against a
stand-in for kafka-metadata-quorum, and a broker's log read for Kafka's loss of the voter set; the controllers'
views of the election, read from their quorum-state files."""
from __future__ import annotations

import json

import pytest

from kchaos.clusters.kraft import directory_id, format_args, layout, server_properties, voter_set_lost
from kchaos.clusters.quorum import elections, unsettled
from kchaos.core.config import ClusterConfig, ConfigError, NemesisConfig, TestConfig, validate
from kchaos.core.protocols import FaultSkipped
from kchaos.harness.build import preflight
from kchaos.nemesis.controllers import RemoveController
from kchaos.nemesis.targets import active_controller


def props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_a_dynamic_quorum_finds_its_controllers_by_bootstrap_and_formats_them_as_the_initial_voters():
    cfg = ClusterConfig(kafka_version="4.4.0", controllers=3, dynamic_quorum=True)
    specs = layout(cfg)
    c1, n1 = next(s for s in specs if s.name == "c1"), next(s for s in specs if s.name == "n1")
    p = props(server_properties(c1, specs, cfg))
    assert "controller.quorum.voters" not in p
    assert p["controller.quorum.bootstrap.servers"] == "172.30.77.21:9093,172.30.77.22:9093,172.30.77.23:9093"
    flag, voters = format_args(c1, specs, cfg)
    assert flag == "--initial-controllers"
    assert voters.split(",") == [f"{100 + i}@172.30.77.{20 + i}:9093:{directory_id(s)}"
                                 for i, s in enumerate((s for s in specs if s.is_controller), 1)]
    assert format_args(n1, specs, cfg) == ("--no-initial-controllers",)
    assert len({directory_id(s) for s in specs}) == len(specs) and all(len(directory_id(s)) == 22 for s in specs)
    static = ClusterConfig(kafka_version="4.4.0", controllers=3)
    assert format_args(c1, layout(static), static) == ()
    assert "controller.quorum.voters" in props(server_properties(c1, layout(static), static))


def test_a_dynamic_quorum_needs_kafka_3_9_and_the_controller_nemesis_needs_one(tmp_path):
    with pytest.raises(ConfigError, match="--dynamic-quorum needs Kafka 3.9 or later"):
        validate(TestConfig(cluster=ClusterConfig(kafka_version="3.7.2", dynamic_quorum=True)))
    with pytest.raises(ConfigError, match="remove-controller changes the controller quorum's voters"):
        preflight(TestConfig(store=str(tmp_path / "r"), cluster=ClusterConfig(kafka_version="4.4.0", controllers=3),
                             nemesis=NemesisConfig(names=("remove-controller",))))


class Quorum:
    """Controllers c1..c3 (ids 101..103), every one a voter until the stand-in tool removes it."""

    nodes, controllers = ["n1", "n2", "n3"], ["c1", "c2", "c3"]

    def __init__(self):
        self.voters = {101: "dirA", 102: "dirB", 103: "dirC"}
        self.calls: list[tuple[str, list[str]]] = []

    def address(self, node):
        return f"10.0.0.{node[1:]}"

    def node_of(self, i):
        return f"c{i - 100}"

    def id_of(self, node):
        return 100 + int(node[1:])

    def conf_file(self, node):
        return "/kchaos/server.properties"

    def kafka_tool(self, node, args):
        self.calls.append((node, args))
        if "describe" in args:
            listed = [{"id": i, "directoryId": d, "endpoints": []} for i, d in sorted(self.voters.items())]
            return 0, (f"ClusterId: x\nLeaderId: 101\nCurrentVoters:          {json.dumps(listed)}\n"
                       "CurrentObservers: []\n")
        if "remove-controller" in args:
            self.voters.pop(int(args[args.index("--controller-id") + 1]))
            return 0, "Removed KRaft controller 101 with directory id dirA"
        if "add-controller" in args:
            self.voters[self.id_of(node)] = {"c1": "dirA", "c2": "dirB", "c3": "dirC"}[node]
            return 0, "Added controller 101"
        return 1, "unknown"


def test_the_active_controller_is_removed_with_its_directory_id_and_added_back_from_its_own_node():
    q = Quorum()
    r = RemoveController(q)
    out = r.begin(["c1"], {})
    assert out["voters_before"] == ["c1", "c2", "c3"] and out["directory_id"] == "dirA"
    node, args = q.calls[1]
    assert args[args.index("--bootstrap-controller") + 1] == "10.0.0.2:9093,10.0.0.3:9093"
    assert args[-4:] == ["--controller-id", "101", "--controller-directory-id", "dirA"]
    assert sorted(q.voters) == [102, 103]
    back = r.end(["c1"])
    node, args = q.calls[-2]
    assert node == "c1" and args[1:3] == ["--command-config", "/kchaos/server.properties"]
    assert args[-1] == "add-controller"
    assert back["voters_after"] == ["c1", "c2", "c3"]


def test_the_heal_adds_back_what_was_removed_and_a_non_voter_or_the_last_voter_is_skipped():
    q = Quorum()
    r = RemoveController(q)
    r.begin(["c2"], {})
    r.heal()
    assert sorted(q.voters) == [101, 102, 103] and r.removed == []
    q.voters = {101: "dirA"}
    with pytest.raises(FaultSkipped, match="c2 is no voter"):
        r.begin(["c2"], {})
    with pytest.raises(FaultSkipped, match="last voter"):
        r.begin(["c1"], {})


def test_a_replaced_controller_is_killed_wiped_whole_and_started_as_an_observer_once_out_of_the_voters():
    q = Quorum()
    done: list[tuple] = []
    q.kill = lambda node: done.append(("kill", node))  # type: ignore[attr-defined]
    q.wipe = lambda node, everything=False: done.append(("wipe", node, everything)) or "wiped all: /d"  # type: ignore[attr-defined]
    q.start = lambda node: done.append(("start", node))  # type: ignore[attr-defined]
    out = RemoveController(q, replace=True).begin(["c1"], {})
    assert 101 not in q.voters and out["wiped"] == "wiped all: /d"
    assert done == [("kill", "c1"), ("wipe", "c1", True), ("start", "c1")]


def test_an_add_refused_while_the_observer_lags_is_tried_again_until_it_caught_up(monkeypatch):
    q = Quorum()
    r = RemoveController(q)
    r.begin(["c1"], {})
    real = q.kafka_tool
    lagging = iter([True, True, False])

    def tool(node, args):
        if "add-controller" in args and next(lagging):
            return 1, ("org.apache.kafka.common.errors.TimeoutException: Aborted add voter operation for "
                       "ReplicaKey(id=101, directoryId=dirA) since it is lagging behind")
        return real(node, args)
    q.kafka_tool = tool  # type: ignore[method-assign]
    monkeypatch.setattr("kchaos.nemesis.controllers.ADD_POLL_S", 0.0)
    out = r.end(["c1"])
    assert out["lagging"] == {"c1": 2} and out["voters_after"] == ["c1", "c2", "c3"]


# A broker's lines of Kafka 3.9.2 (bench/voter_set_lost.sh flip), the voter set shortened.
VOTERS = ("[2026-12-01 01:12:41,037] INFO [RaftManager id=1] Latest set of voters is VoterSet(voters={101=VoterNode("
          "voterKey=ReplicaKey(id=101, directoryId=Optional[bfJ3xeqgVfW_bhgWsVEr7g]))}) at offset 2 "
          "(org.apache.kafka.raft.internals.KRaftControlRecordStateMachine)")
TRUNCATED = ("[2026-12-01 01:12:49,360] INFO [RaftManager id=1] Truncated to offset 0 from Fetch response from leader "
             "103 (org.apache.kafka.raft.KafkaRaftClient)")


def test_a_broker_that_truncated_below_its_voter_set_and_never_read_one_again_has_lost_it():
    why = voter_set_lost("\n".join([VOTERS, TRUNCATED]))
    assert why is not None and "offset 2" in why and "offset 0" in why and "leader 103" in why
    assert voter_set_lost("\n".join([VOTERS, TRUNCATED, VOTERS])) is None  # read again: it knows the voters
    assert voter_set_lost("\n".join([VOTERS, TRUNCATED.replace("offset 0", "offset 3")])) is None  # above it
    assert voter_set_lost(TRUNCATED) is None and voter_set_lost("") is None


class Views:
    """Controllers c1..c3 (ids 101..103) whose quorum-state files hold `files` (a node left out has none)."""

    controllers = ["c1", "c2", "c3"]

    def __init__(self, files: dict[str, str]):
        self.files = files

    def data_dir(self, node):
        return f"/data/{node}"

    def node_of(self, i):
        return f"c{i - 100}" if 101 <= i <= 103 else None

    def exec(self, node, cmd):
        assert cmd == ["cat", f"/data/{node}/__cluster_metadata-0/quorum-state"]
        text = self.files.get(node)
        return (1, f"cat: /data/{node}/__cluster_metadata-0/quorum-state: No such file or directory") if text is None \
            else (0, text)


def state(leader: int, epoch: int, voted: int = -1, version: int = 0) -> str:
    """A quorum-state file as Kafka writes it: data_version 0 (3.7 to 3.9) lists the voters, 1 (4.x) names the
    voted replica's directory."""
    if version == 0:
        return json.dumps({"clusterId": "", "leaderId": leader, "leaderEpoch": epoch, "votedId": voted,
                           "appliedOffset": 0, "currentVoters": [{"voterId": i} for i in (101, 102, 103)],
                           "data_version": 0})
    return json.dumps({"leaderId": leader, "leaderEpoch": epoch, "votedId": voted,
                       "votedDirectoryId": "AAAAAAAAAAAAAAAAAAAAAA", "data_version": 1})


def test_controllers_agreeing_on_one_leader_at_one_epoch_are_settled_and_name_the_active_controller():
    for version in (0, 1):
        views = Views({n: state(102, 5, version=version) for n in ("c1", "c2", "c3")})
        assert elections(views) == {"c1": (102, 5), "c2": (102, 5), "c3": (102, 5)}
        assert unsettled(elections(views)) is None
        assert active_controller(views) == "c2"
        assert elections(views, ["c3"]) == {"c3": (102, 5)}


def test_a_controller_back_from_a_cut_with_a_higher_epoch_and_no_leader_is_not_settled_yet():
    # Cut off, c1 stood for election again and again (no pre-vote before Kafka 4.0): a higher epoch, no leader.
    views = Views({"c1": state(-1, 7, voted=101), "c2": state(102, 5), "c3": state(102, 5)})
    why = unsettled(elections(views))
    assert why == ("the KRaft controllers do not agree on one leader: c1 sees no leader at epoch 7, "
                   "c2 sees leader 102 at epoch 5, c3 sees leader 102 at epoch 5")
    assert active_controller(views) == "c2"  # the highest epoch that names a leader
    # One that still follows the leader before the last election is not settled either.
    stale = Views({"c1": state(101, 4), "c2": state(102, 5), "c3": state(102, 5)})
    assert unsettled(elections(stale)) is not None and active_controller(stale) == "c2"
    # Nor are controllers that all wait for a leader at one epoch.
    assert unsettled(elections(Views({n: state(-1, 6) for n in ("c1", "c2", "c3")}))) is not None


def test_views_that_cannot_be_read_are_left_out_and_none_readable_is_not_waited_for():
    views = Views({"c1": state(103, 9), "c2": "{not json", "c3": state(103, 9)})
    assert elections(views) == {"c1": (103, 9), "c2": None, "c3": (103, 9)}
    assert unsettled(elections(views)) is None
    nothing = Views({})
    assert unsettled(elections(nothing)) is None
    with pytest.raises(FaultSkipped, match="no active controller is known"):
        active_controller(nothing)
