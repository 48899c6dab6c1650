"""Membership faults against a real cluster: a broker whose disk is replaced restarts empty with the same id,
fetches its replicas back and rejoins the ISR, and at the end the brokers agree with the controllers' metadata
log and the in-sync replicas hold the same batches."""
import json
import re

import pytest
from runs import finished_run

from kchaos.core.history import read_history

pytestmark = pytest.mark.cluster


def test_a_follower_whose_disk_is_replaced_restarts_empty_with_its_id_and_catches_up(store):
    run, results = finished_run(store, "wipe-follower", [
        "--acks", "all", "--min-insync", "2", "--nemesis", "wipe:follower", "--interval", "12",
        "--time-limit", "30", "--rate", "100", "--seed", "3"])
    assert results["counts"]["lost"] == 0, results["counts"]
    ops = [o for o in read_history(run / "history.jsonl") if o.get("process") == "nemesis" and o["type"] == "ok"]
    wipes = [o for o in ops if o["f"] == "wipe"]
    assert wipes, ops
    for w in wipes:
        (node,) = w["nodes"]
        # a combined node's logs are gone, its metadata log kept; and it starts again at the mend
        assert w["wiped"] == {node: "wiped data: /var/lib/kafka/data"}, w
        assert any(o["f"] == "start" and o["nodes"] == [node] and o["time"] > w["time"] for o in ops), ops
    wiped = {w["nodes"][0] for w in wipes}
    for node in wiped:
        # each start of the wiped node loaded no log: it came back empty, each time as the same node.id
        log = (run / "nodes" / node / "server.log").read_text()
        loaded = re.findall(r"INFO Loaded (\d+) logs in", log)
        times = sum(1 for w in wipes if w["nodes"] == [node])
        assert loaded[-times:] == ["0"] * times, loaded
        assert re.search(rf"^node\.id={node[1:]}$", (run / "nodes" / node / "server.properties").read_text(), re.M)
    # it caught up: back in every partition's ISR, holding what the leader holds below the high watermark
    views = json.loads((run / "evidence" / "views.json").read_text())
    ids = views["ids"]
    for rows in views["brokers"].values():
        for r in rows:
            if r["topic"] == "kchaos":
                assert {ids[n] for n in wiped} <= set(r["isr"]), r
    agreement = results["agreement"]
    assert (agreement["metadata_divergence"], agreement["replica_divergence"]) == (0, 0), agreement
    assert agreement["partitions_compared"] == 3, agreement
