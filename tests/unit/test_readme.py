"""The README's demo output and figures are what tests/readme.py makes from the recorded demo run, and every link
in it leads to a file of the checkout."""
from __future__ import annotations

import re

from readme import README, ROOT, blocks, render


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
