"""partition-quorum on a cluster with three dedicated controllers: the active controller, cut off from the other
controllers while every broker still reaches it, resigns and another controller is elected (Kafka's own Raft log
says so); after the heal the three agree on one leader again, and no acknowledged write is lost."""
import json
import re
from datetime import UTC, datetime

import pytest
from runs import finished_run, held

from kchaos.core.history import read_history

pytestmark = pytest.mark.cluster
TRANSITION = re.compile(r"^\[(\S+ \S+)\] INFO \[RaftManager id=(\d+)\] Completed transition to (\w+)\((.*)$", re.M)


def _transitions(run, node):
    """(unix s, state, epoch) of each Raft state change in `node`'s server.log."""
    out = []
    for stamp, _, state, rest in TRANSITION.findall((run / "nodes" / node / "server.log").read_text()):
        t = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC).timestamp()
        out.append((t, state, int(re.search(r"epoch=(\d+)", rest).group(1))))
    return out


def test_the_active_controller_cut_off_from_the_quorum_resigns_and_the_quorum_heals(store):
    run, results = finished_run(store, "quorum", [
        "--controllers", "3", "--nemesis", "partition-quorum", "--interval", "5", "--time-limit", "16",
        "--rate", "100", "--seed", "5",
        # a cut lasts past both (nemesis.base.outlive_lag, outlive_session): 10 s rather than Kafka's 15 s, and
        # the controller's resignation and the new election take a few seconds of it
        "--broker-session-timeout-ms", "3000", "--replica-lag-time-max-ms", "5000"])
    assert held(results) and results["counts"]["lost"] == 0 and results["counts"]["acked"] > 0
    test = json.loads((run / "test.json").read_text())
    t0 = test["history_start_unix_ms"] / 1000
    ops = [o for o in read_history(run / "history.jsonl") if o["process"] == "nemesis" and o["type"] == "ok"]
    cut = next(o for o in ops if o["f"] == "start-partition")
    healed = next(o for o in ops if o["f"] == "stop-partition")
    [target] = cut["targets"]
    others = sorted({"c1", "c2", "c3"} - {target})
    assert cut["grudge"] == {target: others, **{o: [target] for o in others}}  # no broker is in the grudge
    start, end = t0 + cut["time"] / 1e9, t0 + healed["time"] / 1e9
    # Effect: the cut-off leader steps down, and one of the others leads while it is cut off.
    assert any(start <= t <= end and s == "ResignedState" for t, s, _ in _transitions(run, target)), target
    assert any(start <= t <= end and s == "Leader" for o in others for t, s, _ in _transitions(run, o))
    # Heal: the last state of each controller is one leader and two followers of the same epoch.
    last = {n: _transitions(run, n)[-1] for n in ("c1", "c2", "c3")}
    assert sorted(s for _, s, _ in last.values()) == ["FollowerState", "FollowerState", "Leader"], last
    assert len({e for _, _, e in last.values()}) == 1, last
