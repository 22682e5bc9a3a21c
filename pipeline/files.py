"""Files that a crash can never leave half-written, the CSV reader that tolerates a cut-off last line, and the YAML
reader that refuses a key given twice.

Every result, report, cache file and log rewrite in the pipeline goes through :func:`atomic_write_bytes` (a figure
through :func:`save_figure`, a checkpoint through :func:`written_atomically`): the data goes to a temporary file beside
the target (``atomic_write_bytes`` flushes it to disk) and is renamed over it, so a reader (or a crash) sees the old
file or the new one, never half. The file gets the permissions a plain ``open`` would give it (0666 less the umask), so
that colleagues on a shared filesystem can read results as they can read anything else.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see the module notes)."""
    with written_atomically(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())


@contextmanager
def written_atomically(path: str | Path):
    """A temporary file beside ``path`` for the block to write (a torch checkpoint, say), renamed over ``path`` when
    the block ends and removed when it fails, so that a full disk leaves the old file, not a truncated one. An
    OSError then names ``path``, the file being made, not the temporary one."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.fchmod(fd, 0o666 & ~current_umask())  # mkstemp makes 0600 whatever the umask
        os.close(fd)
    except OSError as error:
        raise naming(error, path) from error
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except OSError as error:
        Path(tmp).unlink(missing_ok=True)
        raise naming(error, path) from error
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def staging_folder(final: str | Path):
    """A hidden temporary folder beside ``final`` for the block to build it in (and rename it into place); removed
    when the block fails, an OSError then naming ``final`` (not the temporary file, nor a copy's source, which is
    what ``shutil`` names on a full disk)."""
    final = Path(final)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    except OSError as error:
        raise naming(error, final) from error
    try:
        yield staging
    except OSError as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise naming(error, final) from error
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


LOW_DISK_BYTES = 1 << 20  # less free than this and nothing a run writes fits: not a checkpoint, not its log


def full_disk(path: str | Path) -> str | None:
    """"No space left on device: ..." when the disk holding ``path`` (or its nearest existing folder) has less than
    :data:`LOW_DISK_BYTES` free to this user; else None. What a process says when its workers could not even write
    why they failed."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return None
    if free >= LOW_DISK_BYTES:
        return None
    return f"No space left on device: the disk holding {path} has {free:,} bytes free"


def naming(error: OSError, path: str | Path) -> OSError:
    """``error`` said of ``path``: the same errno and reason, the file or folder the caller was making."""
    if error.filename is not None and Path(error.filename) == Path(path) and error.filename2 is None:
        return error
    return type(error)(error.errno, error.strerror or str(error), str(path)) if error.errno else error


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8, newlines as given) to ``path`` atomically."""
    atomic_write_bytes(path, text.encode())


def save_figure(fig, path: str | Path, dpi: int = 100) -> Path:
    """Save a matplotlib figure to ``path`` atomically and close it. A PNG is written without its "Software" entry
    (the matplotlib version), so that its bytes depend only on what it draws."""
    import matplotlib.pyplot as plt

    path = Path(path)
    kind = path.suffix.lstrip(".").lower() or "png"
    try:
        with written_atomically(path) as partial:
            fig.savefig(partial, dpi=dpi, format=kind, metadata={"Software": None} if kind == "png" else None)
    finally:
        plt.close(fig)
    return path


def current_umask() -> int:
    """The process's umask, read without changing it where the system tells (Linux); else set and restored."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def read_complete_rows(path: str | Path) -> tuple[list[str], list[dict]]:
    """Header and rows of a CSV file, ignoring a last line cut short by a crash."""
    text = Path(path).read_text()
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    reader = csv.DictReader(io.StringIO(text))
    return list(reader.fieldnames or []), list(reader)


class DuplicateKey(yaml.YAMLError):
    """A YAML mapping that gives one key twice."""


class _UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """YAML's safe loader, refusing a key given twice in one mapping (plain YAML keeps the last one silently). Merge
    keys (``<<: *defaults``) work as in YAML: a key given in the mapping itself overrides the merged one. Its parser is
    libyaml's where PyYAML was built with it (its wheels are): the same documents, ten times faster than the pure-Python
    one, which every command that scans ``configs/`` for the profile owning a folder pays on each profile."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise DuplicateKey(f"key {key!r} is given twice (line {key_node.start_mark.line + 1}); give it once")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str):
    """``text`` as YAML, safely, a key given twice in one mapping refused (``yaml.YAMLError``)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)


def profile_files(folder: Path, skip: str | Path | None = None) -> Iterator[tuple[Path, dict]]:
    """The profiles among ``folder``'s ``*.yaml`` files (a mapping with a ``grid``: not a run config), in name order,
    each with its parsed mapping; ``skip`` (whatever path names it) left out. A file that does not read or parse is
    passed over: loading it names its fault. What every command asks that checks which profile owns a folder."""
    mine = Path(skip).resolve() if skip is not None else None
    for path in sorted(Path(folder).glob("*.yaml")):
        if path.resolve() == mine:
            continue
        try:
            data = parse_yaml(path.read_text())
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        if isinstance(data, dict) and "grid" in data:
            yield path, data
