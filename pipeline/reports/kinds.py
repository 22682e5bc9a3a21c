"""Which kind of report a folder holds, read off its README's title, so that one kind never overwrites another.

A profile's report (Table 3, :mod:`pipeline.reports.build`), the report of a profile that trains models or tasks
beside the paper's (:mod:`pipeline.reports.baselines`) and a study's report (:mod:`pipeline.reports.recipe`) all
write a ``README.md``; the title line says which wrote it. ``transduce study configs/cpu.yaml --report-only`` once
replaced the committed Table 3 with a study table: now each writer checks the folder first.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.config import ConfigError

# kind -> the start of the title line its README begins with
TITLES = {"profile": "# Report: profile", "study": "# Study:", "screen": "# Screen:", "baselines": "# Baselines:"}


class ReportRefused(ConfigError):
    """A report that would silently lose or change what the report already there says."""


def kind_there(out_dir: Path) -> str | None:
    """The kind of report ``out_dir`` holds (None: no README, or one no report writer made)."""
    readme = Path(out_dir) / "README.md"
    try:
        with readme.open(encoding="utf-8", errors="replace") as handle:
            first = handle.readline()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return next((kind for kind, title in TITLES.items() if first.startswith(title)), None)


def check_kind(out_dir: Path, kind: str) -> None:
    """Refuse to write a ``kind`` report where another kind's report is (:class:`ReportRefused`, naming both)."""
    there = kind_there(out_dir)
    if there is not None and there != kind:
        raise ReportRefused(f"{out_dir} holds a {there}'s report; a {kind}'s report never overwrites it: give the "
                            f"{kind} its own folder (--out, or its profile's reports: key)")
