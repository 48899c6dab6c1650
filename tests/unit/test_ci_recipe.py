"""The CI recipes: the GitHub Actions workflows pass a YAML lint, the nightly one's steps are the ones docs/ci.md
describes, every recipe runs real kchaos commands, the sharded one runs each shard of one suite with one seed and
merges them, and docs/ci.md's figures for the nightly suite are the suite's own."""
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
SHARDED = ROOT / "examples" / "ci" / "github-actions-sharded.yml"
DOC = (ROOT / "docs" / "ci.md").read_text()


def steps() -> list[dict]:
    return yaml.safe_load(WORKFLOW.read_text())["jobs"]["nightly"]["steps"]


def test_the_workflows_pass_yamllint_strictly():
    config = YamlLintConfig("{extends: default, rules: {line-length: {max: 120}}}")
    for workflow in (WORKFLOW, SHARDED):
        problems = list(linter.run(workflow.read_text(), config, str(workflow)))
        assert problems == [], [str(p) for p in problems]
        assert "schedule" in yaml.safe_load(workflow.read_text())["on"]


def test_every_step_is_described_in_the_docs_by_its_name_and_in_its_order():
    names = [s["name"] for s in steps()]
    described = re.findall(r"^- \*\*(.+?)\*\*", DOC[DOC.index("## The workflow's steps"):], re.M)
    assert described == names


def test_the_kchaos_commands_of_the_recipes_are_commands_kchaos_takes():
    sharded = [s for job in yaml.safe_load(SHARDED.read_text())["jobs"].values() for s in job["steps"]]
    commands = [line.strip() for s in steps() + sharded for line in _run(s).splitlines()]
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
            # a whole night fails on a regression; a shard's night is judged once merged
            assert (ROOT / args[1]).is_file() and ("--fail-on-regression" in args) != ("--shard" in args)
    assert found >= 10


# What GitHub puts for the expressions the recipes use, as a runner would see it.
EXPRESSIONS = {"${{ matrix.shard }}": "2", "${{ github.run_id }}": "9876543210"}


def _run(step: dict) -> str:
    """A step's `run`, with its `env` put in for "$NAME" as the shell would, and GitHub's expressions for values."""
    run = str(step.get("run", ""))
    for name, value in step.get("env", {}).items():
        for expr, seen in EXPRESSIONS.items():
            value = value.replace(expr, seen)
        run = run.replace(f'"${name}"', shlex.quote(value))
    return run


def test_the_sharded_workflow_runs_every_shard_of_one_suite_with_one_seed_then_merges_them():
    jobs = yaml.safe_load(SHARDED.read_text())["jobs"]
    shards = jobs["shard"]["strategy"]["matrix"]["shard"]
    [run] = [_run(s) for s in jobs["shard"]["steps"] if "--shard" in str(s.get("run"))]
    args = build_parser().parse_args(shlex.split(run)[1:])
    assert args.shard == f"2/{len(shards)}" and shards == list(range(1, len(shards) + 1))
    assert args.seed == int(EXPRESSIONS["${{ github.run_id }}"])  # one seed, the same in every shard's job
    assert jobs["merge"]["needs"] == "shard"
    [merge] = [s["run"] for s in jobs["merge"]["steps"] if "kchaos merge" in str(s.get("run"))]
    assert "--fail-on-regression" in merge and "sharded" in DOC and SHARDED.name in DOC


def test_the_docs_give_the_nightly_suite_its_own_numbers():
    suite = load_suite(ROOT / "suites" / "nightly.yaml")
    runs = len(suite.cells) * suite.repeat
    minutes = suite.repeat * sum(suite.config(c, 0, Path("/tmp"), "local[*]").time_limit for c in suite.cells) / 60
    assert f"{len(suite.cells)} cells, each run {'twice' if suite.repeat == 2 else suite.repeat}" in DOC
    assert f"{runs} runs of 120 s, {minutes:.0f} minutes of workload" in DOC
