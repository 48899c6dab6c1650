"""`kchaos serve --warm-check`: `kchaos check` of a run below the store is answered on the service's warm Spark,
with what a check here would give; a store without a live service is checked here, as before."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kchaos.core.exit_codes import EXIT_BAD_INPUT
from kchaos.harness.warm_check import SOCKET, CheckRefused, CheckService, ask, socket_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
KCHAOS = [sys.executable, "-m", "kchaos"]
WARM = "checked by kchaos serve --warm-check"


def _store(where: Path) -> tuple[Path, Path]:
    store = where / "results"
    shutil.copytree(FIXTURES / "03_acks-all_misr-2", store / "03_acks-all_misr-2")
    [run] = (store / "03_acks-all_misr-2").iterdir()
    return store, run


def _wait_for_socket(store: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while not (store / SOCKET).is_socket():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "no check socket"
        time.sleep(0.1)


def _check(run: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*KCHAOS, "check", str(run), *args], capture_output=True, text=True, timeout=300)


@pytest.mark.spark
def test_a_check_below_a_warm_store_is_answered_there_as_a_check_here_would_be(tmp_path):
    store, run = _store(tmp_path / "served")
    kept = (run / "history.jsonl").read_bytes()
    serve = subprocess.Popen([*KCHAOS, "serve", "--warm-check", "--store", str(store), "--port", "0"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _wait_for_socket(store, serve)
        assert stat.S_IMODE((store / SOCKET).stat().st_mode) == 0o600
        second = subprocess.run([*KCHAOS, "serve", "--warm-check", "--store", str(store), "--port", "0"],
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == EXIT_BAD_INPUT and len(second.stderr.splitlines()) == 1, second.stderr
        assert "another kchaos serve already checks this store" in second.stderr
        (run / "report.html").unlink(missing_ok=True)
        served = _check(run, "--json")
        assert served.returncode == 0, served.stderr
        assert WARM in served.stderr and "report:" in served.stderr
        assert (run / "report.html").is_file()  # rewritten, as a check here rewrites it
        (run / "history.jsonl").write_text('{"type": "invoke", "f": "send"\n')  # damaged
        bad = _check(run)
        assert bad.returncode == EXIT_BAD_INPUT and len(bad.stderr.splitlines()) == 1, bad.stderr
    finally:
        os.killpg(serve.pid, signal.SIGKILL)  # as if killed: the socket stays, and nobody answers on it
        serve.wait(30)
    assert (store / SOCKET).is_socket()
    (run / "history.jsonl").write_bytes(kept)
    # Nobody answers on the socket: checked here, and what the service answered is what a check here gives.
    here = _check(run, "--json")
    assert here.returncode == 0 and WARM not in here.stderr, here.stderr
    assert json.loads(served.stdout) == json.loads(here.stdout)


def test_the_service_answers_only_for_runs_below_its_store_and_passes_input_errors_on(tmp_path):
    root = tmp_path / "store"
    (root / "a" / "run").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()

    def check(run: Path, say, report: bool) -> dict:
        if run.name == "bad":
            raise ValueError("bad: not a run directory\nsecond line")
        say(f"checked {run.name}" + ("" if report else ", its report left to the caller"))
        return {"valid": True, "run": run.name}

    with CheckService(root, check, (ValueError,)) as service:
        assert socket_for(root / "a" / "run") == service.path and socket_for(tmp_path / "elsewhere") is None
        assert ask(root / "a" / "run") == ({"valid": True, "run": "run"}, ["checked run"], root.resolve())
        assert ask(root / "a" / "run", report=False)[1] == ["checked run, its report left to the caller"]
        with pytest.raises(CheckRefused, match=r"^bad: not a run directory$"):
            ask(root / "a" / "bad")
        assert ask(root / ".." / "elsewhere") is None  # resolved first: no store above it, so checked by the caller
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:  # a client asking for a path outside
            s.connect(str(service.path))
            s.sendall(json.dumps({"run": str(tmp_path / "elsewhere")}).encode() + b"\n")
            answer = json.loads(s.makefile().readline())
        assert answer == {"error": f"{tmp_path / 'elsewhere'}: not below {root.resolve()}", "input": False}
    assert not service.path.exists()
    assert ask(root / "a" / "run") is None
