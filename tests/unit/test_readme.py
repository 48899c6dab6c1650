"""The README's demo output and figures are what tests/readme.py makes from the recorded demo run, every link in it
leads to a file of the checkout, and its commands work as written."""
from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from readme import README, ROOT, blocks, commands, night, render


def test_the_readme_holds_the_recorded_demo_as_the_script_renders_it_now():
    assert blocks(README.read_text()) == render(), "run `python tests/readme.py --write`"


def test_the_recorded_demo_is_the_demo_suite_and_its_figures_are_its_numbers():
    said = render()
    assert said["demo-output"].splitlines()[1].startswith("suite demo: 3 of 3 cells kept Kafka's promise")
    rows = [line for line in said["demo-output"].splitlines() if line.startswith("pass ")]
    assert len(rows) == 3
    for number in re.findall(r"\d[\d,]*\d(?= of )", said["demo-figures"]):  # each "N of M acknowledged"
        assert any(number.replace(",", "") in row.split() for row in rows), number


def test_every_link_of_the_readme_leads_to_a_file_of_the_checkout():
    text = README.read_text()
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target
    assert len(text.splitlines()) <= 140


@pytest.mark.spark
def test_every_readme_command_works_as_written_in_a_checkout_after_the_demo(tmp_path):
    """The README's commands, as written, in a directory laid out as `make demo` leaves a checkout: the recorded demo
    night as results/suites/demo/latest, a recorded run as results/latest, the suites beside. Those that start a
    cluster run with --dry-run; `kchaos serve` answers its first page. Left to the integration tests: the SSH
    commands (they would reach the README's example hosts) and `explain`, which reads the Kafka files that only a
    real run collects (test_suite_run.py runs it on one)."""
    results = tmp_path / "results"
    stamp = night()
    shutil.copytree(stamp, results / "suites" / "demo" / stamp.name, symlinks=True)
    (results / "suites" / "demo" / "latest").symlink_to(stamp.name)
    [run] = (ROOT / "tests" / "fixtures" / "runs" / "03_acks-all_misr-2").iterdir()
    shutil.copytree(run, results / run.name, symlinks=True)
    (results / "latest").symlink_to(run.name)
    (tmp_path / "suites").symlink_to(ROOT / "suites")
    starts = ("run", "suite", "scenario")
    todo = []
    for command in commands():
        words = shlex.split(command)
        if words[0] != "kchaos" or "hosts.yaml" in words or words[1] in ("serve", "explain"):
            continue
        if words[1] in starts and "--dry-run" not in words and "--list" not in words:
            words.append("--dry-run")
        todo.append([sys.executable, "-m", "kchaos", *words[1:]])
    assert len(todo) >= 8, todo

    def run_one(cmd: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    with ThreadPoolExecutor(4) as pool:
        for cmd, done in zip(todo, pool.map(run_one, todo)):
            assert done.returncode == 0, (cmd, done.stdout[-1500:], done.stderr[-1500:])
    serve = subprocess.Popen([sys.executable, "-m", "kchaos", "serve"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        page = None
        for _ in range(60):
            try:
                page = urllib.request.urlopen("http://127.0.0.1:8000/", timeout=5).read().decode()
                break
            except OSError:
                time.sleep(0.5)
        assert page is not None and "demo" in page
        assert serve.poll() is None, serve.stderr.read() if serve.stderr else ""  # the page was this serve's
    finally:
        serve.terminate()
        serve.wait(30)
