# Two commands a researcher needs: `make reproduce` and `make test`.
# Both create the virtual environment first; nothing is installed by hand.

PYTHON  ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
PROFILE ?= cpu

.PHONY: venv lock demo test test-slow lint reproduce report far-lengths baselines recipe bench clean-venv

PIP     := $(BIN)/python -m pip --disable-pip-version-check
TORCH   := torch==2.13.0

# The environment is the lock's: requirements.lock pins every package but torch to the version the committed reports
# were made with. torch is pinned exactly apart (pyproject.toml and TORCH above) so that one lock serves every
# machine: here pip takes the local CPU wheel; on a GPU node the CUDA build of the same version, installed first
# (docs/running.md, "On a GPU"), already satisfies the pin. Re-installed whenever the lock or pyproject.toml changes.
$(STAMP): pyproject.toml requirements.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet '$(TORCH)'
	$(PIP) install --quiet -r requirements.lock
	$(PIP) install --quiet --no-deps -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

# Refresh requirements.lock: resolve pyproject.toml's ranges afresh in a throwaway environment and record exactly
# what was installed (pip freeze: the versions the tests then run on, from the tools this machine already has; uv
# and pip-tools would resolve torch without the local wheel). Run the tests on the new lock before committing it.
lock:
	rm -rf .venv-lock && $(PYTHON) -m venv .venv-lock
	.venv-lock/bin/python -m pip install --quiet --disable-pip-version-check '$(TORCH)' -e '.[dev]'
	{ echo "# Exact versions of every package the pipeline installs, torch apart (pinned in pyproject.toml and the"; \
	  echo "# Makefile, so that a GPU node keeps its CUDA build). Made by \`make lock\` (pip freeze) with"; \
	  echo "# $$(.venv-lock/bin/python --version); \`make venv\` installs from it."; \
	  .venv-lock/bin/python -m pip freeze --exclude-editable --disable-pip-version-check \
	    | grep -v -i -E '^(torch|triton|nvidia-[a-z0-9_-]+|transduce-pipeline)(==| @)'; } > requirements.lock.tmp
	mv requirements.lock.tmp requirements.lock
	rm -rf .venv-lock

# A Stack-LSTM learns reversal (a few minutes of one core): a few lines printed, a one-page report in demo/
# (git-ignored: the run, its convergence curve, its memory trace, its accuracy by length out to 512).
demo: venv
	$(BIN)/transduce demo

# The suite spread over the machine's cores (pytest-xdist: a process per core, each test on whichever is free;
# `make test TEST_PROCESSES=0` runs it in this one process). A plain `pytest tests/...` runs in one process.
TEST_PROCESSES ?= auto

test: venv
	$(BIN)/python -m pytest -q -m "not slow" -n $(TEST_PROCESSES) --dist worksteal

test-slow: venv
	$(BIN)/python -m pytest -q -m slow -n $(TEST_PROCESSES) --dist worksteal

# Style and likely bugs (pycodestyle, pyflakes, import order, bugbear; line length 120): pyproject.toml [tool.ruff].
# Then the layers of docs/ARCHITECTURE.md (import-linter: pyproject.toml [tool.importlinter]): no upward import.
lint: venv
	$(BIN)/ruff check pipeline tests
	$(BIN)/lint-imports

# data -> grid -> training -> evaluation -> reports/$(PROFILE)/. Interrupted and run again, it continues: finished
# runs are skipped and interrupted ones resume from their checkpoints. The report is written even when some runs
# failed (they are listed in it); the exit status then says so.
reproduce: venv
	$(BIN)/transduce generate
	$(BIN)/transduce sweep configs/$(PROFILE).yaml; status=$$?; \
	$(BIN)/transduce report configs/$(PROFILE).yaml && exit $$status

# reports/$(PROFILE)/ regenerated from the committed runs, training nothing (about a minute): the archive in
# reports/$(PROFILE)/finished_runs is restored where runs/$(PROFILE) lacks a run, then the report is written. With
# the same runs and the same code it is the committed report, byte for byte (figures aside if matplotlib differs).
report: venv
	$(BIN)/transduce archive configs/$(PROFILE).yaml --restore
	$(BIN)/transduce report configs/$(PROFILE).yaml

# Far lengths for the cpu profile's learned memory runs archived before they were measured (archives keep no
# checkpoint): each trained again, run for run, by configs/far-lengths.yaml (~2.5 CPU-hours, resumable), archived
# under reports/cpu/far-lengths/, where `make report` (cpu) takes their far lengths from. A reproduction from scratch
# needs none of it: its own runs measure their far lengths at their end.
far-lengths: venv
	$(BIN)/transduce generate
	$(BIN)/transduce sweep configs/far-lengths.yaml; status=$$?; \
	$(BIN)/transduce archive configs/far-lengths.yaml && $(BIN)/transduce report configs/far-lengths.yaml && exit $$status

# The baselines profile (reports/baselines/; ~38 CPU-hours, more than one sitting), continued from its archive: the
# runs archived in reports/baselines/finished_runs (and unfinished_runs, with their checkpoints) are restored where
# runs/baselines lacks them, the sweep trains the rest, and what it finished or left unfinished is archived again:
# commit reports/baselines/ and a later machine continues from there. Stopped, the sweep checkpoints the runs in
# training: SIGTERM to the sweep alone lets this recipe archive them; after Ctrl-C (which stops the recipe too) run
# `transduce archive configs/baselines.yaml` before committing.
# The report (which scores the cross-check tasks' selected runs, hours more) is written once every run is done.
baselines: venv
	$(BIN)/transduce generate
	$(BIN)/transduce archive configs/baselines.yaml --restore
	$(BIN)/transduce sweep configs/baselines.yaml; status=$$?; \
	$(BIN)/transduce archive configs/baselines.yaml || exit 1; \
	if [ $$status -eq 0 ]; then $(BIN)/transduce report configs/baselines.yaml; else exit $$status; fi

# The recipe study: which readings of the paper make the memory models learn on most seeds (reports/recipe/; its
# ITG part, reports/recipe/itg/, from configs/recipe-itg.yaml; about 15 CPU-hours together, resumable like a sweep).
recipe: venv
	$(BIN)/transduce generate
	$(BIN)/transduce study configs/recipe.yaml
	$(BIN)/transduce study configs/recipe-itg.yaml

# Training speed and memory of every model beside a plain nn.LSTM: reports/bench.md and reports/bench.json
# (under 10 minutes; run it on an otherwise idle machine).
bench: venv
	$(BIN)/transduce bench

clean-venv:
	rm -rf $(VENV)
