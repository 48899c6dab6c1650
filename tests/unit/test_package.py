"""kchaos installs as one package: a wheel built from the checkout holds no top-level module but `kchaos`, ships
the files its code reads at run time (templates, node scripts, the Java client's sources), and `python -m kchaos`
is the command."""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "kchaos", "core", "harness", "clusters", "workloads", "nemesis",
           "evidence", "checkers", "reports")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """The wheel setuptools builds from a copy of the checkout (a build in place would leave build/ behind)."""
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("dist")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(path, src / name)
    code = "import sys; from setuptools import build_meta; print(build_meta.build_wheel(sys.argv[1]))"
    proc = subprocess.run([sys.executable, "-c", code, str(out)], cwd=src, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return zipfile.ZipFile(out / proc.stdout.strip().splitlines()[-1])


def test_the_wheel_installs_only_the_kchaos_package(wheel):
    tops = {n.split("/")[0] for n in wheel.namelist() if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"kchaos"}
    entry = wheel.read(next(n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert "kchaos = kchaos.harness.cli.main:main" in entry


def test_the_wheel_holds_every_module_and_the_files_read_at_run_time(wheel):
    names = set(wheel.namelist())
    modules = {f"kchaos/{p.relative_to(ROOT / 'kchaos' if top == 'kchaos' else ROOT)}"
               for top in SOURCES[2:] for p in (ROOT / top).rglob("*.py") if "__pycache__" not in p.parts}
    data = {"kchaos/reports/templates/report.html.j2", "kchaos/clusters/node/kafka-ctl", "kchaos/clusters/lazyfs.c",
            "kchaos/clusters/kafka-pom.xml", "kchaos/clusters/setup-host.sh",
            "kchaos/workloads/java/KchaosTxnClient.java", "kchaos/workloads/java/KchaosQueueClients.java"}
    assert modules - names == set() and data - names == set()


def test_python_dash_m_kchaos_is_the_command():
    proc = subprocess.run([sys.executable, "-m", "kchaos", "--version"], capture_output=True, text=True, timeout=120,
                          cwd="/")
    assert proc.returncode == 0 and proc.stdout.startswith("kchaos "), proc.stderr
