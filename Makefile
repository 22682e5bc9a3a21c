# Two commands a researcher needs: `make reproduce` and `make test`.
# Both create the virtual environment first; nothing is installed by hand.

PYTHON  ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
PROFILE ?= cpu

.PHONY: venv test test-slow lint reproduce recipe bench clean-venv

# Re-install whenever pyproject.toml changes. torch is pinned exactly in pyproject.toml, so pip takes the
# local CPU wheel instead of resolving a CUDA build.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

test: venv
	$(BIN)/python -m pytest -q -m "not slow"

test-slow: venv
	$(BIN)/python -m pytest -q -m slow

# Style and likely bugs (pycodestyle, pyflakes, import order, bugbear; line length 120): pyproject.toml [tool.ruff].
lint: venv
	$(BIN)/ruff check pipeline tests

# data -> grid -> training -> evaluation -> reports/$(PROFILE)/. Interrupted and run again, it continues: finished
# runs are skipped and interrupted ones resume from their checkpoints. The report is written even when some runs
# failed (they are listed in it); the exit status then says so.
reproduce: venv
	$(BIN)/transduce generate
	$(BIN)/transduce sweep configs/$(PROFILE).yaml; status=$$?; \
	$(BIN)/transduce report configs/$(PROFILE).yaml && exit $$status

# The recipe study: which readings of the paper make the memory models learn on most seeds (reports/recipe/;
# a few CPU-hours, resumable like a sweep).
recipe: venv
	$(BIN)/transduce generate
	$(BIN)/transduce study configs/recipe.yaml

# Training speed and memory of every model beside a plain nn.LSTM: reports/bench.md and reports/bench.json
# (under 10 minutes; run it on an otherwise idle machine).
bench: venv
	$(BIN)/transduce bench

clean-venv:
	rm -rf $(VENV)
