"""The README says what `make run` does as it does it: the counts it names are the ones
`setup_demo` works with on the bundled data."""

from __future__ import annotations

import re
from pathlib import Path

from annotations.text_rule import clean_text
from models_app.siamese.text import comparison_key

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def demo_inputs_queued() -> int:
    """The sample inputs `setup_demo` queues: the file's lines, one item per distinct text."""
    lines = (ROOT / "data" / "demo_inputs.txt").read_text(encoding="utf-8").splitlines()
    return len({comparison_key(clean_text(line, max_length=500)) for line in lines if line.strip()})


def test_the_readme_names_the_number_of_demo_inputs_setup_queues():
    step = re.search(r"3\. `manage\.py setup_demo`:(.*?)\n4\. ", README, re.S).group(1)
    named = [int(n) for n in re.findall(r"queues the (\d+)", step)]
    assert named == [demo_inputs_queued()]
    # And the bundled O*NET it imports, as the command reports it.
    occupations = (ROOT / "data" / "onet" / "Occupation Data.txt").read_text().count("\n") - 1
    assert f"{occupations:,} occupations" in " ".join(step.split())
