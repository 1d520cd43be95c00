# The two commands a newcomer needs (see README.md):
#   make run    set up .venv and run the InvBench pipeline on the embedded defaults
#   make test   set up .venv and run the test suite (SLURM tests need `.ci/cluster.sh start`)
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= test,hf,ray,limits

.PHONY: setup run test lint bench clean

$(BIN)/launch: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[$(EXTRAS)]"
	touch $(BIN)/launch

setup: $(BIN)/launch

run: setup
	$(BIN)/launch invbench

test: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -ra $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .

bench: setup
	$(BIN)/python bench/overhead.py
	$(BIN)/python bench/verifier.py
	$(BIN)/python bench/inference.py

clean:
	rm -rf $(VENV) runs .pytest_cache
