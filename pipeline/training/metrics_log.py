"""The run's ``metrics.csv``: a Lightning logger written against Lightning's public ``Logger`` interface only.

It is resumable: a run restarted from a checkpoint keeps every row logged up to that checkpoint and drops the rows
after it, which the resumed run logs again (Lightning's own CSV logger deletes an existing file when a directory is
reused). Rows are appended; the header is every key logged so far, sorted (the column order Lightning's CSV logger
used, so older logs read the same), and when a new key appears the file is rewritten atomically with the new header.
A crash can leave at most a cut-off last line, which :func:`pipeline.files.read_complete_rows` ignores.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from lightning.pytorch.loggers import Logger
from lightning.pytorch.utilities import rank_zero_only

from pipeline.files import atomic_write_text, read_complete_rows
from pipeline.rundir import RunDir


class ResumableCSVLogger(Logger):
    """Writes ``<run dir>/metrics.csv``. ``keep_through_step``: the step of the checkpoint being resumed from (None:
    a fresh run, which starts the file afresh); ``keep_rows``: keep only that many of those rows (a checkpoint
    written at a run's end off its schedule resumes from before the rows that end logged)."""

    def __init__(self, run_dir: str | Path, keep_through_step: int | None = None, keep_rows: int | None = None) -> None:
        super().__init__()
        self.path = RunDir(run_dir).metrics_file
        self._header: list[str] = []
        self._pending: list[dict] = []
        if self.path.is_file():
            if keep_through_step is None:
                self.path.unlink()
            else:
                header, rows = read_complete_rows(self.path)
                kept = [row for row in rows if row.get("step") and int(row["step"]) <= keep_through_step]
                kept = kept if keep_rows is None else kept[:keep_rows]
                self._header = header
                self._rewrite(kept)

    @property
    def name(self) -> str:
        return "metrics"

    @property
    def version(self) -> str:
        return ""

    @rank_zero_only
    def log_hyperparams(self, params, *args, **kwargs) -> None:
        """The run's config is its ``config.yaml``; nothing more to write here."""

    @rank_zero_only
    def log_metrics(self, metrics: dict, step: int | None = None) -> None:
        row = {key: value.item() if hasattr(value, "item") else value for key, value in metrics.items()}
        row["step"] = step
        self._pending.append(row)

    @rank_zero_only
    def save(self) -> None:
        if not self._pending:
            return
        keys = sorted(set(self._header).union(*self._pending))
        if keys != self._header:
            rows = read_complete_rows(self.path)[1] if self.path.is_file() else []
            self._header = keys
            self._rewrite(rows + self._pending)
        else:
            with open(self.path, "a", newline="") as file:
                csv.DictWriter(file, fieldnames=self._header).writerows(self._pending)
        self._pending = []

    @rank_zero_only
    def finalize(self, status: str) -> None:
        self.save()

    def _rewrite(self, rows: list[dict]) -> None:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=self._header)
        writer.writeheader()
        writer.writerows(rows)
        atomic_write_text(self.path, out.getvalue())
