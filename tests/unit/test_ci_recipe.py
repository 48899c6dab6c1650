"""The CI recipe: the GitHub Actions workflow passes a YAML lint, its steps are the ones docs/ci.md describes and
run real kchaos commands, and docs/ci.md's figures for the nightly suite are the suite's own."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml
from yamllint import linter
from yamllint.config import YamlLintConfig

from kchaos.harness.cli.parser import build_parser
from kchaos.harness.suites.suite import load_suite

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "examples" / "ci" / "github-actions.yml"
DOC = (ROOT / "docs" / "ci.md").read_text()


def steps() -> list[dict]:
    return yaml.safe_load(WORKFLOW.read_text())["jobs"]["nightly"]["steps"]


def test_the_workflow_passes_yamllint_strictly():
    config = YamlLintConfig("{extends: default, rules: {line-length: {max: 120}}}")
    problems = list(linter.run(WORKFLOW.read_text(), config, str(WORKFLOW)))
    assert problems == [], [str(p) for p in problems]
    assert "schedule" in yaml.safe_load(WORKFLOW.read_text())["on"]


def test_every_step_is_described_in_the_docs_by_its_name_and_in_its_order():
    names = [s["name"] for s in steps()]
    described = re.findall(r"^- \*\*(.+?)\*\*", DOC[DOC.index("## The workflow's steps"):], re.M)
    assert described == names


def test_the_kchaos_commands_of_the_recipes_are_commands_kchaos_takes():
    commands = [line.strip() for s in steps() for line in str(s.get("run", "")).splitlines()]
    commands += [line for line in (ROOT / "examples" / "ci" / "nightly.sh").read_text().splitlines()
                 if ".venv/bin/kchaos" in line]
    found = 0
    for command in commands:
        words = shlex.split(command)
        if ".venv/bin/kchaos" not in words:
            continue
        args = words[words.index(".venv/bin/kchaos") + 1:]
        build_parser().parse_args(args)  # exits on an option kchaos does not take
        found += 1
        if args[:1] == ["suite"]:
            assert (ROOT / args[1]).is_file() and "--fail-on-regression" in args
    assert found >= 5


def test_the_docs_give_the_nightly_suite_its_own_numbers():
    suite = load_suite(ROOT / "suites" / "nightly.yaml")
    runs = len(suite.cells) * suite.repeat
    minutes = suite.repeat * sum(suite.config(c, 0, Path("/tmp"), "local[*]").time_limit for c in suite.cells) / 60
    assert f"{len(suite.cells)} cells, each run {'twice' if suite.repeat == 2 else suite.repeat}" in DOC
    assert f"{runs} runs of 120 s, {minutes:.0f} minutes of workload" in DOC
