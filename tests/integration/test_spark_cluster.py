"""The checker on an existing Spark cluster: a standalone master and worker started from the
pyspark installation (loopback only), a history checked through `--spark-master spark://...`."""
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyspark
import pytest

KCHAOS = [sys.executable, "-m", "harness.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(path: Path, needle: str, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and needle in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    pytest.fail(f"{needle!r} not in {path.name}: {path.read_text(errors='replace')[-2000:] if path.exists() else ''}")


@pytest.fixture
def standalone(tmp_path):
    """spark://127.0.0.1:PORT with one 1-core worker; both stopped afterwards."""
    home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = []

    def start(name, *args):
        log = tmp_path / f"{name}.log"
        p = subprocess.Popen([str(home / "bin" / "spark-class"), *args], env=env, stdout=open(log, "w"),
                             stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(p)
        return p, log

    master, mlog = start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                         "--port", str(port), "--webui-port", str(free_port()))
    wait_for(mlog, "I have been elected leader", master)
    work = tmp_path / "work"
    worker, wlog = start("worker", "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                         "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()),
                         "--work-dir", str(work))
    wait_for(wlog, "Successfully registered with master", worker)
    try:
        yield url, work
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()


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
    assert proc.returncode == 1, proc.stderr[-3000:]  # invalid: a lost write
    res = json.loads(proc.stdout)
    assert res["counts"]["acked"] == 3 and res["counts"]["lost"] == 1 and res["examples"]["lost"] == [2]
    # The work was done by the cluster's executor, not in the driver.
    apps = list(work.glob("app-*"))
    assert apps, "no application ran on the worker"
    assert any((d / "stderr").exists() for a in apps for d in a.iterdir())
