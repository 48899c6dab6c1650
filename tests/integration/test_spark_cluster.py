"""The checker on an existing Spark cluster: a standalone master and worker started from the
pyspark installation (loopback only), a history checked through `--spark-master spark://...`."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from spark_standalone import StandaloneSpark

KCHAOS = [sys.executable, "-m", "kchaos"]
pytestmark = pytest.mark.beside


@pytest.fixture
def standalone(tmp_path):
    """spark://127.0.0.1:PORT with one 1-core worker, and its work directory; both stopped afterwards."""
    with StandaloneSpark(tmp_path, workers=1, memory="1g") as spark:
        yield spark.url, spark.work[0]


def history(tmp_path: Path) -> Path:
    """Values 1..3 acked on partition 0; the complete drain returns 1 and 3: value 2 is lost."""
    run = tmp_path / "run"
    run.mkdir()
    ops, t = [], 0

    def op(**kw):
        nonlocal t
        t += 1000
        ops.append({"index": len(ops), "time": t, **kw})

    for v in (1, 2, 3):
        op(process=0, type="invoke", f="send", topic="t", partition=0, value=v)
        op(process=0, type="ok", f="send", topic="t", partition=0, value=v, offset=v - 1)
    op(process=1, type="invoke", f="drain", partition=0)
    op(process=1, type="ok", f="drain", partition=0, records=[[0, 0, 1], [0, 2, 3]], complete=True)
    (run / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
    return run


def test_check_runs_on_a_standalone_spark_cluster(standalone, tmp_path):
    url, work = standalone
    run = history(tmp_path)
    proc = subprocess.run([*KCHAOS, "check", str(run), "--json", "--spark-master", url,
                           "--spark-driver-host", "127.0.0.1"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]  # fail: a lost write, acks=all by default, no ISR to excuse it
    res = json.loads(proc.stdout)
    assert res["counts"]["acked"] == 3 and res["counts"]["lost"] == 1 and res["examples"]["lost"] == [2]
    # The work was done by the cluster's executor, not in the driver.
    apps = list(work.glob("app-*"))
    assert apps, "no application ran on the worker"
    assert any((d / "stderr").exists() for a in apps for d in a.iterdir())
