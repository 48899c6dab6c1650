"""Dependencies inside harness/ run one way: suite and scenario files, and the experiment subcommands, sit below
the command line (harness/cli/main.py) and never import it."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imported_after(*modules: str) -> list[str]:
    """The harness modules loaded by importing `modules` in a fresh interpreter."""
    code = ("import importlib, json, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "print(json.dumps(sorted(k for k in sys.modules if k.startswith('kchaos.harness'))))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_suite_and_scenario_files_do_not_import_the_command_line(tmp_path):
    """Importing them, loading a file (which parses and preflights every cell as `kchaos run` would) and building a
    cell's TestConfig: none of it loads harness.cli (suite.py used to import it inside those functions)."""
    (tmp_path / "s.yaml").write_text("base: {time_limit: 5}\nmatrix: {acks: [1, all]}\n")
    code = ("import json, sys\nfrom pathlib import Path\n"
            "from kchaos.harness.suites.suite import load_suite\n"
            "from kchaos.harness.scenarios.scenario import find_scenario, load_scenario\n"
            "loaded = 'kchaos.harness.cli.main' in sys.modules\n"
            f"s = load_suite(Path({str(tmp_path / 's.yaml')!r}))\n"
            "sc = load_scenario(find_scenario('unclean-election'))\n"
            "cfg = s.config(s.cells[0], 1, Path('/tmp'), 'local[*]')\n"
            "print(json.dumps([loaded, cfg.producer.acks, len(sc.variants) > 0,"
            " 'kchaos.harness.cli.main' in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [False, "1", True, False]


def test_the_experiment_subcommands_do_not_import_the_command_line():
    loaded = _imported_after("kchaos.harness.cli.experiments")
    assert "kchaos.harness.cli.experiments" in loaded
    assert "kchaos.harness.cli.main" not in loaded


def test_no_harness_module_imports_another_ones_private_names():
    """What two modules share is public in the lower one (scenario.py used to import suite's _Lines, _head ...)."""
    private = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kchaos.harness"):
                private += [f"{path.name}: {node.module}.{a.name}" for a in node.names
                            if a.name.startswith("_") and not a.name.startswith("__")]
    assert private == []
