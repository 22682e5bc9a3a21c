"""The rungs a profile's successive halving has decided, read back from its runs' logs: which settings each kept by the
rule in force (a setting stands at the mean of its seeds' standings, :func:`pipeline.sweep.halving.setting_rank`) and
which it would have kept ranked by each setting's best seed instead (§5 of the paper selects one run, not a mean).
docs/training.md ("Successive halving") quotes it. Trains and changes nothing:

    python -m pipeline.reports.rungs [PROFILE [RUNS]]     # default: configs/cpu.yaml, runs/cpu
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from pipeline.config import SweepConfig
from pipeline.reports.table3 import start_of
from pipeline.sweep.halving import brackets, walk_rungs


@dataclasses.dataclass(frozen=True)
class Rung:
    """One decided rung of a bracket: its settings ranked as the rule ranks them (each with its seeds' standings, in
    seed order), how many it kept, and the settings the best-seed ranking would have kept."""
    bracket: str
    at: int
    keep: int
    ranked: tuple[tuple[str, tuple[float, ...]], ...]
    kept_by_best: tuple[str, ...]

    @property
    def kept(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.ranked[:self.keep])

    @property
    def differs(self) -> bool:
        return set(self.kept) != set(self.kept_by_best)


def setting_name(group) -> str:
    """A setting as the report names it: its learning rate and start ("lr 0.0005, push +1 pop -1")."""
    return ", ".join(part for part in (f"lr {group[0].training.lr:g}", start_of(group[0].model)) if part)


def best_seed_rank(group, standings: dict[str, float]) -> tuple[float, str]:
    """Where a setting would stand ranked by its best seed (ties to the lower run id, as the rule's)."""
    return min(standings[run.run_id()] for run in group), min(run.run_id() for run in group)


def decided_rungs(sweep: SweepConfig, root: Path) -> list[Rung]:
    """Every rung of ``sweep``'s brackets that its runs under ``root`` have decided, in grid order. Later rungs follow
    the rule's decisions (the settings it kept), as the sweep did (:func:`walk_rungs`)."""
    out = []
    for halving, runs in brackets(sweep):
        first = runs[0]
        name = f"{first.task}, {first.model.name}, h{first.model.hidden}"
        for _, rung, keep, ranked, standings in walk_rungs(halving, runs, root):
            if standings is None:
                break  # not decided yet
            by_best = sorted(ranked, key=lambda group, at=standings: best_seed_rank(group, at))
            out.append(Rung(name, rung, keep,
                            tuple((setting_name(g), tuple(standings[r.run_id()] for r in g)) for g in ranked),
                            tuple(setting_name(g) for g in by_best[:keep])))
    return out


def rungs_text(rungs: list[Rung]) -> str:
    """One line per decided rung (its kept settings, and the best-seed ranking's where they differ), then a count."""
    lines = []
    for r in rungs:
        kept = "; ".join(f"{name} ({' / '.join(f'{v:.3g}' for v in values)})" for name, values in r.ranked[:r.keep])
        line = f"{r.bracket}, rung {r.at:,}: kept {kept}"
        if r.differs:
            line += f"; by best seed: {'; '.join(r.kept_by_best)}"
        lines.append(line)
    differ = sum(r.differs for r in rungs)
    lines.append(f"{len(rungs)} decided rungs; ranked by each setting's best seed, {differ} would have kept other "
                 "settings")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    from pipeline.sweep import load_sweep, sweep_root

    sweep = load_sweep(Path(argv[0]) if argv else Path("configs/cpu.yaml"))
    print(rungs_text(decided_rungs(sweep, sweep_root(sweep, Path(argv[1]) if len(argv) > 1 else None))))


if __name__ == "__main__":
    main(sys.argv[1:])
