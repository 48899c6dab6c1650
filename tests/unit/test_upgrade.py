"""The upgrade nemesis without a cluster: its options, its schedule, one node per op (controllers first), the
finalize command per line, and which release each node ran when."""
from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from kchaos import nemesis
from kchaos.clusters.distribution import run_libs
from kchaos.core.config import ClusterConfig, ConfigError, NemesisConfig, TestConfig, validate
from kchaos.core.kafka_versions import feature_answer, finalize_commands, release_key, release_timeline
from kchaos.harness.cli.main import main
from kchaos.nemesis.base import FaultSkipped
from kchaos.nemesis.upgrade import Upgrade, plan
from kchaos.reports.run.report import _releases


def cfg(then: str = "finalize", to: str | None = "4.4.0", names: tuple[str, ...] = ("upgrade",),
        **cluster) -> TestConfig:
    return TestConfig(time_limit=120, cluster=ClusterConfig(**cluster),
                      nemesis=NemesisConfig(names=names, interval=10, upgrade_to=to, upgrade_then=then))


@pytest.mark.parametrize("c, message", [
    (cfg(to=None), "--nemesis upgrade needs --upgrade-to VERSION"),
    (cfg(to="3.7.2", kafka_version="4.1.0"), "--upgrade-to 3.7.2 is not newer than --kafka-version 4.1.0"),
    (cfg(to="3.7.2"), "is not newer"),
    (cfg(to="5.0.0"), "--upgrade-to 5.0.0: kchaos cannot run it"),
    (cfg(to="4.4"), "--upgrade-to 4.4 names a line: give its release 4.4.0"),
    (cfg(then="later"), "--upgrade-then must be one of finalize, stay, downgrade"),
    (cfg(names=("kill",)), "--upgrade-to applies to --nemesis upgrade only"),
])
def test_bad_upgrade_options_are_one_line(c, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(")):
        validate(c)


def test_good_options_go_in_test_json():
    assert validate(cfg()).nemesis.upgrade_to == "4.4.0"
    assert cfg().to_dict()["nemesis"]["upgrade_then"] == "finalize"
    plain = TestConfig().to_dict()["nemesis"]
    assert (plain["upgrade_to"], plain["upgrade_then"]) == (None, "finalize")


def test_the_command_line_refuses_before_anything_is_made(tmp_path, capsys):
    store = tmp_path / "store"
    assert main(["run", "--nemesis", "upgrade", "--upgrade-to", "3.6", "--store", str(store)]) == 3
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "--upgrade-to 3.6: kchaos cannot run it" in err[0] and not store.exists()


@pytest.mark.parametrize("then, fs", [
    ("finalize", ["upgrade"] * 3 + ["finalize"]),
    ("stay", ["upgrade"] * 3),
    ("downgrade", ["upgrade"] * 6),
])
def test_the_schedule_is_one_op_per_node_then_what_follows(then, fs):
    c = cfg(then)
    ops = nemesis.PACKAGES["upgrade"].schedule(random.Random(1), c, "upgrade", None)
    assert [o.op["f"] for o in ops] == fs
    assert [o.op["version"] for o in ops][:3] == ["4.4.0"] * 3
    if then == "downgrade":
        assert [o.op["version"] for o in ops][3:] == ["3.7.2"] * 3
    assert ops[0].at == pytest.approx(18) and all(0 < b.at - a.at <= 10 for a, b in zip(ops, ops[1:]))
    assert ops[-1].at < c.time_limit
    assert nemesis.fault_kind("upgrade").mends is None  # later ops are more of the change, not its undoing


def test_a_roll_that_would_not_fit_comes_closer_together():
    ops = plan(cfg("downgrade"), random.Random(0), "upgrade", 10, 2)
    assert [round(o.at) for o in ops] == [10, 12, 14, 16, 18, 20]
    short = nemesis.PACKAGES["upgrade"].schedule(random.Random(0), replace(cfg("downgrade"), time_limit=40),
                                                 "upgrade", None)
    assert len(short) == 6 and short[-1].at < 40 * 0.9


class FakeCluster:
    """The cluster calls Upgrade makes, recorded."""

    def __init__(self, nodes, controllers):
        self.nodes, self.controllers = nodes, controllers
        self.members = {*nodes, *controllers}
        self.release = {n: "3.7.2" for n in {*nodes, *controllers}}
        self.calls: list[tuple] = []
        self.feature_calls = 0

    def __getattr__(self, name):
        def call(*args, **kw):
            self.calls.append((name, *args))
            if name == "use_release":
                self.release[args[0]] = args[1]
            if name == "upgrade_features":
                self.feature_calls += 1
                if args[1] == 1 and self.feature_calls == 2:
                    raise RuntimeError("n1: kafka-features upgrade failed (1):  group.version. Broker 2 does not "
                                       "support this feature.\nCould not upgrade transaction.version to 2. The update "
                                       "failed for all features since the following feature had an error: Invalid "
                                       "update version 1 for feature group.version. Broker 2 does not support this "
                                       "feature.\n7 out of 7 operation(s) failed.")
                return ["metadata.version was upgraded to 33.", "transaction.version was upgraded to 2."][args[1]]
            return None
        return call


def test_each_op_restarts_one_node_on_the_release_controllers_first(monkeypatch):
    c = FakeCluster(["n1", "n2", "n3"], ["c1", "n1"])
    up = Upgrade(c, cfg(controllers=0))
    monkeypatch.setattr(up, "_rejoined", lambda node, timeout: c.calls.append(("rejoined", node)))
    done = [up.invoke({"f": "upgrade", "version": "4.4.0", "pick": k})["node"] for k in range(4)]
    assert done[0] == "c1" and sorted(done[1:]) == ["n1", "n2", "n3"]
    assert c.calls[:4] == [("stop", "c1"), ("use_release", "c1", "4.4.0"), ("start", "c1"), ("rejoined", "c1")]
    with pytest.raises(FaultSkipped, match="every node runs Kafka 4.4.0 already"):
        up.invoke({"f": "upgrade", "version": "4.4.0", "pick": 9})
    c.calls.clear()
    out = up.invoke({"f": "finalize", "version": "4.4.0"})
    # the other features are refused until every node has registered again under the new metadata.version
    assert out["metadata"] == "metadata.version was upgraded to 33."
    assert out["refused"] == ("Invalid update version 1 for feature group.version. "
                              "Broker 2 does not support this feature.")
    assert list(out["restarted"]) == ["c1", "n1", "n2", "n3"]
    assert out["features"] == "transaction.version was upgraded to 2." and "features_tries" not in out
    assert [x[0] for x in c.calls if x[0] in ("upgrade_features", "stop")] == [
        "upgrade_features", "upgrade_features", "stop", "stop", "stop", "stop", "upgrade_features"]


def test_feature_answer_keeps_the_tools_answers_and_drops_the_admin_clients_log_lines():
    warn = ("[2026-11-27 12:00:24,912] WARN [AdminClient clientId=adminclient-1] Connection to node -1 "
            "(/172.30.77.11:9092) could not be established. Node may not be available. "
            "(org.apache.kafka.clients.NetworkClient)")
    # seen in a with-leader-kills roll: the WARN came last and was recorded as the answer
    assert feature_answer(f"metadata.version was upgraded to 27.\n{warn}\n") == "metadata.version was upgraded to 27."
    # --release-version moves several features: every answer is kept, in order, not only the last
    many = "group.version was upgraded to 1.\ntransaction.version was upgraded to 2.\n"
    assert feature_answer(warn + "\n" + many) == ("group.version was upgraded to 1.; "
                                                 "transaction.version was upgraded to 2.")
    assert feature_answer("share.version can be downgraded to 0.") == "share.version can be downgraded to 0."
    # no answer line at all: the last line is kept rather than nothing
    assert feature_answer(f"{warn}\n") == warn and feature_answer("  \n") == ""


@pytest.mark.parametrize("version, flags", [("3.9.2", ["--metadata"]), ("4.0.2", ["--metadata", "--release-version"]),
                                            ("4.4.0", ["--metadata", "--release-version"])])
def test_finalize_moves_metadata_version_first_then_from_4_0_the_other_features(version, flags):
    cmds = finalize_commands(version, "n1:9092")
    assert all(c[:4] == ["org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", "n1:9092", "upgrade"]
               for c in cmds)
    assert [c[4:] for c in cmds] == [[f, version[:3]] for f in flags]


def test_release_order_and_which_release_each_node_ran_when():
    assert release_key("3.9.2") < release_key("4.0.0") < release_key("4.10.0")
    ops = [{"index": 5, "time": 20e9, "process": "nemesis", "type": "invoke", "f": "upgrade"},
           {"index": 6, "time": 21e9, "process": 0, "type": "invoke", "f": "send"},
           {"index": 7, "time": 31e9, "process": "nemesis", "type": "ok", "f": "upgrade", "node": "n2",
            "to": "4.4.0"},
           {"index": 8, "time": 40e9, "process": "nemesis", "type": "invoke", "f": "upgrade"},
           {"index": 9, "time": 41e9, "process": "nemesis", "type": "info", "f": "upgrade"}]
    tl = release_timeline(ops, {"n1": "3.7.2", "n2": "3.7.2"})
    assert tl == {"n1": [{"release": "3.7.2", "from_s": 0.0}],
                  "n2": [{"release": "3.7.2", "from_s": 0.0}, {"release": "4.4.0", "from_s": 31.0, "down_s": 20.0}]}
    rows = _releases({"releases": tl})
    assert rows[-1] == {"node": "n2", "release": "4.4.0", "from_s": 31.0, "down_s": 20.0}


def test_a_rolled_run_is_decoded_with_the_release_it_rolled_to(monkeypatch):
    seen = []
    monkeypatch.setattr("kchaos.clusters.distribution.resolve",
                        lambda v, d=None: seen.append(v) or type("D", (), {"libs": v}))
    test = {"versions": {"kafka": "3.7.2"}, "nemesis": {"upgrade_to": "4.4.0", "upgrade_then": "finalize"}}
    assert run_libs(test) == "4.4.0"
    assert run_libs({**test, "nemesis": {"upgrade_to": "4.4.0", "upgrade_then": "downgrade"}}) == "3.7.2"


class Isr:
    """A cluster whose partition 0 (replicas n1, n2) has ISR `isr`; n3 is down (another nemesis's kill)."""

    nodes, controllers = ["n1", "n2", "n3"], ["n1", "n2", "n3"]

    def __init__(self, isr):
        self.isr = isr

    def is_running(self, node):
        return node != "n3"

    def listener(self, node):
        return f"10.0.0.{node[1:]}:9092"

    def node_of(self, i):
        return f"n{i}"


def test_a_restarted_node_is_waited_for_until_it_is_back_in_its_isr_whoever_else_is_down(monkeypatch):
    from kchaos.clusters.admin import PartitionState

    c = Isr((1,))
    asked = []
    monkeypatch.setattr("kchaos.clusters.admin.partitions",
                        lambda b, t: asked.append(b) or {0: PartitionState(0, 1, (1, 2), c.isr)})
    up = Upgrade(c, cfg())
    with pytest.raises(RuntimeError, match=r"n2 not back in the ISR of kchaos partitions \[0\]"):
        up._rejoined("n2", 0.5)
    c.isr = (1, 2)
    up._rejoined("n2", 0.5)  # n3 is down, and it does not matter: it is not n2
    assert set(asked) == {"10.0.0.2:9092"}  # the restarted node itself
    with pytest.raises(RuntimeError, match="n3: Kafka is not running"):
        up._rejoined("n3", 0.1)


def test_the_report_configuration_says_where_the_roll_went():
    from kchaos.reports.run.report import _settings

    rows = {r["k"]: r["v"] for r in _settings({"nemesis": {"names": ["upgrade"], "upgrade_to": "4.4.0",
                                                           "upgrade_then": "downgrade"}})}
    assert rows["rolling upgrade to, then"] == "4.4.0, downgrade"
    assert "rolling upgrade to, then" not in {r["k"] for r in _settings({"nemesis": {"names": ["kill"]}})}


def test_finalize_tries_again_while_a_just_restarted_voter_has_not_said_what_it_supports(monkeypatch):
    c = FakeCluster(["n1", "n2", "n3"], ["n1", "n2", "n3"])
    refusals = iter([RuntimeError("n1: kafka-features upgrade --release-version 4.4 failed (1): Invalid upgrade of "
                                  "kraft.version to KRAFT_VERSION_1 because not all of the voters support it")] * 2)

    def upgrade_features(version, step):
        if step == 1 and (e := next(refusals, None)) is not None:
            raise e
        return ["metadata.version was upgraded to 27.", "kraft.version was upgraded to 1."][step]
    c.upgrade_features = upgrade_features
    down: set[str] = set()
    c.is_running = lambda node: node not in down
    monkeypatch.setattr("kchaos.nemesis.upgrade.wait_fixed", lambda s: __import__("tenacity").wait_none())
    out = Upgrade(c, cfg(controllers=0)).invoke({"f": "finalize", "version": "4.4.0"})
    assert out["features"] == "kraft.version was upgraded to 1." and "restarted" not in out
    assert out["features_tries"] == 3  # the op says the retry fired: two refusals, then the upgrade
    # a controller another nemesis holds down comes back only after this op: refused at once, not waited for
    refusals = iter([RuntimeError("Invalid upgrade of kraft.version to KRAFT_VERSION_1 because not all of the "
                                  "voters support it")])
    down.add("n3")
    with pytest.raises(RuntimeError, match="not all of the voters"):
        Upgrade(c, cfg(controllers=0)).invoke({"f": "finalize", "version": "4.4.0"})
    # any other refusal of the second step is raised at once, not waited out
    steps = []

    def refused(version, step):
        steps.append(step)
        if step == 1:
            raise RuntimeError("Invalid update version 9 for feature share.version")
        return "metadata.version was upgraded to 27."
    c.upgrade_features = refused
    with pytest.raises(RuntimeError, match="Invalid update version 9"):
        Upgrade(c, cfg(controllers=0)).invoke({"f": "finalize", "version": "4.4.0"})
    assert steps == [0, 1]


def test_the_report_says_what_the_finalize_answered_or_why_it_was_not_done(tmp_path):
    from test_report import S, history, make_run, render  # test_report puts tests/ (browser.py) on the path

    from kchaos.reports.run.report import write_report
    fin = {"process": "nemesis", "f": "finalize", "nemesis": "upgrade", "version": "4.4.0"}
    answered = [{"index": 90, "time": 7 * S, "type": "invoke", **fin},
                {"index": 91, "time": 9 * S, "type": "ok", **fin, "metadata": "metadata.version was upgraded to 33.",
                 "refused": "Broker 1 does not support this feature.", "restarted": {"n1": 9.9, "n2": 7.2},
                 "features": "group.version was upgraded to 1.; transaction.version was upgraded to 2.",
                 "features_tries": 2}]
    refused = [answered[0], {"index": 91, "time": 8 * S, "type": "info", **fin,
                             "error": "ClusterError: no running broker runs Kafka 4.4.0 to finalize from"}]
    texts = []
    for ops in (answered, refused, answered[:1]):
        run = make_run(tmp_path / str(len(texts)), results=False, ops=history() + ops)
        test = json.loads((run / "test.json").read_text())
        test["nemesis"].update(names=["upgrade"], upgrade_to="4.4.0", upgrade_then="finalize")
        test["releases"] = {"n1": [{"release": "3.7.2", "from_s": 0.0}, {"release": "4.4.0", "from_s": 5.0}]}
        (run / "test.json").write_text(json.dumps(test))
        page = render(write_report(run))
        page.assert_clean()
        texts.append(page.text[page.text.index("Finalize"):page.text.index("Files")])
    ok, fail, cut = texts
    assert "from 7.0 s to 9.0 s" in ok and "metadata.version was upgraded to 33.\n" in ok
    assert "refused at first (Broker 1 does not support this feature.)" in ok and "n1 in 9.9 s, n2 in 7.2 s" in ok
    assert "group.version was upgraded to 1.\ntransaction.version was upgraded to 2.\n" in ok and "2 tries" in ok
    assert "Not done: ClusterError: no running broker runs Kafka 4.4.0 to finalize from" in fail
    assert "upgraded" not in fail and "ended before it completed" in cut and "from 7.0 s (" in cut
