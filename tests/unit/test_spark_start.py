"""prestart with a niceness: Spark's JVM runs at it, and the process that started it keeps its own. The JVM is
launched with no Python run in the child before its exec, in a session of its own."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark

CHILD = """
import os, sys
from kchaos.checkers.spark import prestart, spark_context
prestart("local[1]", niceness=int(sys.argv[1]))
sc = spark_context("local[1]")
jvm = sc._gateway.proc.pid
print(os.getsid(jvm) == jvm, os.getpriority(os.PRIO_PROCESS, jvm), os.getpriority(os.PRIO_PROCESS, 0))
sc.stop()
"""


def _at_niceness_0() -> None:
    os.setpriority(os.PRIO_PROCESS, 0, 0)  # `make test` runs this lane at 19, which would leave nothing to see


@pytest.mark.parametrize("niceness", [0, 19])
def test_the_jvm_runs_at_the_niceness_asked_and_the_caller_keeps_its_own(niceness):
    if os.getpriority(os.PRIO_PROCESS, 0) != 0 and os.geteuid() != 0:
        pytest.skip("this process runs niced, and only root may start a child at niceness 0")
    # In a child process: the niceness is the JVM's for its life, and this process's Spark tests share a context.
    done = subprocess.run([sys.executable, "-c", CHILD, str(niceness)], capture_output=True, text=True, timeout=300,
                          preexec_fn=_at_niceness_0)
    assert done.returncode == 0, done.stderr[-2000:]
    own_session, jvm, caller = done.stdout.split()[-3:]
    assert (own_session, int(jvm), int(caller)) == ("True", niceness, 0)


def test_the_jvm_launch_runs_no_python_in_the_child():
    from pyspark import java_gateway

    from kchaos.checkers.spark import spawn_jvm

    assert java_gateway.Popen is spawn_jvm

    def in_the_child() -> None:  # would fail the launch (SubprocessError) had it run
        raise RuntimeError("Python ran in the child")
    p = spawn_jvm(["sh", "-c", "ps -o sid= -p $$"], stdout=subprocess.PIPE, text=True, preexec_fn=in_the_child)
    assert int(p.communicate(timeout=60)[0]) == p.pid
