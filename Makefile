# The two commands a newcomer needs (see README.md):
#   make run    set up .venv and run every benchmark on the embedded defaults (no model)
#   make test   set up .venv and run the test suite (SLURM tests need `.ci/cluster.sh start`)
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= test,hf,ray,limits

.PHONY: setup run test lint bench clean

$(BIN)/launch: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip "setuptools>=77"  # also builds the wheel in tests/test_packaging.py
	$(BIN)/pip install -q torch==2.13.0
	@# a stale egg-info in the checkout would shadow the install's entry points (the registry)
	rm -rf veribatch.egg-info
	$(BIN)/pip install -q -e ".[$(EXTRAS)]"
	touch $(BIN)/launch

setup: $(BIN)/launch
	@# No system package is installed from here; one line says what a missing sandbox means.
	@command -v bwrap >/dev/null 2>&1 || [ -x /usr/bin/bwrap ] || echo "make setup: bubblewrap (bwrap) not found: REFUTE's no-model default runs its shipped programs without namespace isolation (recorded as such); model runs need it: apt-get install bubblewrap (or dnf install bubblewrap), as root"

run: setup
	$(BIN)/launch invbench
	$(BIN)/launch cebench
	$(BIN)/launch refute
	@# DafnyComp's verify stage needs Dafny 4.10: without it the Dafny-free stages run, the
	@# install hint is printed and launch exits 2 -- accepted here only when no dafny exists.
	@rc=0; $(BIN)/launch dafnycomp || rc=$$?; \
	if [ $$rc -eq 2 ] && ! $(BIN)/python -c "from veribatch.verifiers.registry import get_verifier; get_verifier('dafny').version" >/dev/null 2>&1; then \
	  echo "make run: DafnyComp ran without Dafny 4.10 (see the hint above); the other stages are done"; \
	else exit $$rc; fi

test: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -ra --durations=25 $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/lint-imports  # the layering (pyproject.toml [tool.importlinter]; also tests/test_layering.py)

bench: setup
	$(BIN)/python bench/overhead.py
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/verifier.py
	$(BIN)/python bench/cebench.py
	$(BIN)/python bench/judge.py
	$(BIN)/python bench/inference.py
	$(BIN)/python bench/faults.py

clean:
	rm -rf $(VENV) runs .pytest_cache
