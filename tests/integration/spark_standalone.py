"""A standalone Spark cluster (one master, N workers) started from the pyspark installation, bound to
127.0.0.1 only: for the cluster integration test and bench/check_cluster.py."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyspark


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(log: Path, needle: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Until `needle` appears in `log`; RuntimeError with the log's tail if `proc` dies or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and needle in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    raise RuntimeError(f"{needle!r} not in {log}: {log.read_text(errors='replace')[-2000:] if log.exists() else ''}")


class StandaloneSpark:
    """spark://127.0.0.1:PORT with `workers` one-core workers of `memory` each, logs and work
    directories under `tmp` (`work[i]` is worker i's); every process is stopped on exit."""

    def __init__(self, tmp: Path, *, workers: int = 1, memory: str = "1g"):
        self.home = Path(pyspark.__file__).parent
        self.env = {**os.environ, "SPARK_HOME": str(self.home), "SPARK_LOCAL_IP": "127.0.0.1",
                    "PYSPARK_PYTHON": sys.executable}
        self.tmp, self.workers, self.memory, self.procs = Path(tmp), workers, memory, []
        self.url = f"spark://127.0.0.1:{free_port()}"
        self.work = [self.tmp / f"work{i}" for i in range(workers)]

    def _start(self, name: str, *args: str) -> tuple[subprocess.Popen, Path]:
        log = self.tmp / f"{name}.log"
        p = subprocess.Popen([str(self.home / "bin" / "spark-class"), *args], env=self.env,
                             stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(p)
        return p, log

    def __enter__(self) -> StandaloneSpark:
        try:
            port = self.url.rsplit(":", 1)[1]
            master, log = self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                      "--port", port, "--webui-port", str(free_port()))
            wait_for(log, "I have been elected leader", master)
            for i, work in enumerate(self.work):
                worker, log = self._start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", self.url,
                                          "--host", "127.0.0.1", "--cores", "1", "--memory", self.memory,
                                          "--webui-port", str(free_port()), "--work-dir", str(work))
                wait_for(log, "Successfully registered with master", worker)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
