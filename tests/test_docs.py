"""The reference docs read as the code is now (issue 79): prose wrapped at 120 characters, as the code is, and no
dated narrative or commit hash (those live in the study logs beside the reports they explain)."""

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_no_line_of_the_docs_runs_past_120_characters():
    long = [f"{path.name}:{n}" for path in sorted(DOCS.glob("*.md"))
            for n, line in enumerate(path.read_text().splitlines(), start=1) if len(line) > 120]
    assert long == []


DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
COMMIT = re.compile(r"(?<![\w-])(?=[0-9a-f]*[a-f])[0-9a-f]{7}\b")  # a short hash: seven hex digits, a letter among them


def test_the_docs_name_no_date_and_no_commit():
    dated = [f"{path.name}:{n}" for path in sorted(DOCS.glob("*.md"))
             for n, line in enumerate(path.read_text().splitlines(), start=1)
             if DATE.search(line) or COMMIT.search(line)]
    assert dated == []
