"""Lightning's CSV logger, made resumable: a run restarted from a checkpoint keeps every row logged up to that
checkpoint and drops the rows after it, which the resumed run logs again. (The stock logger deletes an existing
``metrics.csv`` when a run directory is reused.) Every rewrite is atomic."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter

from pipeline.files import atomic_write_text, read_complete_rows


class _ResumableWriter(ExperimentWriter):
    def __init__(self, log_dir: str, keep_through_step: int | None) -> None:
        self._keep_through_step = keep_through_step
        super().__init__(log_dir)

    def _check_log_dir_exists(self) -> None:
        path = Path(self.metrics_file_path)
        if not path.is_file():
            return
        if self._keep_through_step is None:  # a fresh run in a used directory: start the log afresh
            path.unlink()
            return
        header, rows = read_complete_rows(path)
        kept = [row for row in rows if row.get("step") and int(row["step"]) <= self._keep_through_step]
        self.metrics_keys = header
        self._write(header, kept)

    def _rewrite_with_new_header(self, fieldnames: list[str]) -> None:
        header, rows = read_complete_rows(self.metrics_file_path)
        self._write(fieldnames, rows)

    def _write(self, fieldnames: list[str], rows: list[dict]) -> None:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=fieldnames)
        writer.writeheader()
        writer.writerows(rows)
        atomic_write_text(self.metrics_file_path, out.getvalue())


class ResumableCSVLogger(CSVLogger):
    """Writes ``<save_dir>/metrics.csv``. ``keep_through_step``: the step of the checkpoint being resumed from."""

    def __init__(self, save_dir: str | Path, keep_through_step: int | None = None) -> None:
        super().__init__(save_dir=str(save_dir), name="", version="", flush_logs_every_n_steps=10**9)
        self._keep_through_step = keep_through_step

    @property
    def experiment(self) -> ExperimentWriter:
        if self._experiment is None:
            self._experiment = _ResumableWriter(self.log_dir, self._keep_through_step)
        return self._experiment
