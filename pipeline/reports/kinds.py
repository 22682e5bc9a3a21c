"""Which kind of report a folder holds, read off its README's title, so that one kind never overwrites another.

A profile's report (Table 3, :mod:`pipeline.reports.build`), the report of a profile that trains models or tasks
beside the paper's (:mod:`pipeline.reports.baselines`) and a study's report (:mod:`pipeline.reports.recipe`) all
write a ``README.md``; the title line says which wrote it. ``transduce study configs/cpu.yaml --report-only`` once
replaced the committed Table 3 with a study table: now each writer checks the folder first.
"""

from __future__ import annotations

import re
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


TITLE_NAME = re.compile(r"`([^`]+)`")
# what a report folder may hold besides the report: the profile's archive of its runs (transduce archive)
ARCHIVE_FOLDERS = frozenset({"finished_runs", "unfinished_runs"})


def name_there(out_dir: Path) -> str | None:
    """The profile (or study, screen) name the report in ``out_dir`` was written for, read off its README's title
    (None: no report there)."""
    if kind_there(out_dir) is None:
        return None
    with (Path(out_dir) / "README.md").open(encoding="utf-8", errors="replace") as handle:
        found = TITLE_NAME.search(handle.readline())
    return found.group(1) if found else None


def is_run_folder(folder: Path) -> bool:
    """Whether ``folder`` is a run's folder (its config.yaml beside its log, results or checkpoints)."""
    return (folder / "config.yaml").is_file() and any(
        (folder / name).exists() for name in ("metrics.csv", "results.json", "checkpoints", ".lock"))


def folder_owner(folder: Path, archive: bool = False) -> str | None:
    """What ``folder`` belongs to when no report may ever be written into it, whatever the flags ('' never): the
    repository (its root, a folder above it, its reports/ folder that holds every profile's), a run folder or a folder
    inside one, a runs folder (one holding run folders; ``archive``: an archive of runs is one, and may be written
    into). None: a report may be written there, as far as this says."""
    from pipeline import paths

    here = Path(folder).resolve()
    repo = paths.REPO_ROOT.resolve()
    if here == repo or here in repo.parents:
        return f"the repository{'' if here == repo else ' (a folder above it)'} ({repo})"
    if (here / ".git").exists() or (here / "pyproject.toml").is_file():
        return "a source checkout"
    if here == paths.REPORTS_DIR.resolve():
        return "the reports folder that holds every profile's report"
    for above in (here, *here.parents):
        if is_run_folder(above):
            return f"the run folder {above}"
    if not archive and here.is_dir() and any(is_run_folder(child) for child in here.iterdir() if child.is_dir()):
        return "a runs folder (it holds run folders)"
    return None


def profile_owning(folder: Path, config_file: str | Path | None) -> Path | None:
    """The profile in ``configs/`` (another file than ``config_file``) whose reports folder ``folder`` is."""
    from pipeline import paths
    from pipeline.files import profile_files

    here = Path(folder).resolve()
    for other, data in profile_files(paths.CONFIG_DIR, skip=config_file):
        if not isinstance(data.get("name"), str):
            continue
        reports = data.get("reports") or data["name"]
        if isinstance(reports, str) and (paths.REPORTS_DIR / reports).resolve() == here:
            return other
    return None


def check_report_folder(out_dir: Path, kind: str, name: str, config_file: str | Path | None = None,
                        own: Path | None = None, force: bool = False) -> None:
    """Refuse, in one line and before anything is written (:class:`ReportRefused`), a ``kind`` report of profile
    ``name`` into a folder it does not own, whatever path led there (``--out``, a profile's reports: key, a symlink):
    never the repository root or a folder above it, ``reports/`` itself, a run folder or a runs folder, nor another
    kind's report (:func:`check_kind`); without ``force``, not another profile's report (its README's title names
    it), another profile's reports folder (``configs/*.yaml``), or a folder of files no report wrote (a report
    replaces its README and removes the figures it did not draw). ``own``: the profile's default reports folder,
    whose other contents (another profile's nested folder, its archive) are its own."""
    out_dir = Path(out_dir)
    shown = str(out_dir) or "''"
    owner = folder_owner(out_dir)
    if owner is not None:
        raise ReportRefused(f"{shown} is {owner}, which a report never writes into (it replaces README.md and removes "
                            f"figures there): give the {kind}'s report a folder of its own (--out)")
    check_kind(out_dir, kind)
    if force:
        return
    there = name_there(out_dir)
    if there is not None and there != name:
        raise ReportRefused(f"{shown} holds the {kind}'s report of {there!r}, not of {name!r}: give {name!r} its own "
                            "folder (--out), or pass --force to replace it")
    other = profile_owning(out_dir, config_file)
    if other is not None:
        raise ReportRefused(f"{shown} is the reports folder of {other.name}, not of {name!r}: give {name!r} its own "
                            "folder (--out), or pass --force to write there anyway")
    if (there is None and out_dir.is_dir() and (own is None or out_dir.resolve() != Path(own).resolve())
            and any(child.name not in ARCHIVE_FOLDERS for child in out_dir.iterdir())):
        raise ReportRefused(f"{shown} holds files that no report wrote (no report's README.md there): give the "
                            f"{kind}'s report an empty or new folder (--out), or pass --force to write there anyway")


def check_runs_report(sweep, config_file: str | Path, runs_root: Path | None, out_dir: Path, kind: str,
                      force: bool = False) -> None:
    """A study's or a screen's report (``kind``) refused before anything is written: into a folder it does not own
    (:func:`check_report_folder`), and, unless ``force``, from no done run (a fresh clone's ``--report-only`` would
    replace the committed report with a table of pending runs)."""
    from pipeline.rundir import DONE
    from pipeline.sweep.status import sweep_root, sweep_status

    check_report_folder(out_dir, kind, sweep.name, config_file, sweep.reports_dir(), force)
    statuses = sweep_status(sweep, runs_root)
    if not force and statuses and not any(s.state in DONE for s in statuses):
        raise ReportRefused(f"0 of the {len(statuses)} runs of {config_file} are done in {sweep_root(sweep, runs_root)}"
                            f", so the {kind}'s report would say nothing: is the runs folder right (--runs-dir)? "
                            "Train them first, or pass --force to write it anyway")


def check_archive_folder(folder: Path, runs_root: Path) -> None:
    """Refuse (:class:`ReportRefused`, one line, before anything is copied) an archive into a folder it does not own:
    the repository root or above, ``reports/`` itself, a run folder, or the runs folder it archives from (or a
    folder inside it), where replacing an archived copy would remove the run itself."""
    shown = str(folder) or "''"
    owner = folder_owner(folder, archive=True)
    here, runs = Path(folder).resolve(), Path(runs_root).resolve()
    if owner is None and (here == runs or runs in here.parents):
        owner = (f"the runs folder it archives from ({runs_root})" if here == runs
                 else f"inside the runs folder {runs_root}")
    if owner is not None:
        raise ReportRefused(f"--to {shown} is {owner}, which an archive never writes into (it replaces and removes "
                            "run folders there): give the archive a folder of its own")
