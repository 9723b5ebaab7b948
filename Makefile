# make run    create .venv, install everything, run the main job (python sweeps/scaling.py) on a local Ray
# make test   create .venv, install everything, lint (ruff) and type-check (mypy) the package and the
#             studies, run the tests but those marked slow (make test ARGS=--all: every test, what CI runs)
# ARGS passes flags to the sweep, or to pytest: make run ARGS="--smoke"
PYTHON ?= python3
VENV ?= .venv
# torch first and pinned: on the project's machines this takes the local build instead of a download
TORCH ?= torch==2.14.1 torchvision==0.29.1
BIN := $(VENV)/bin

.PHONY: run test typecheck install
run: install
	$(BIN)/python sweeps/scaling.py $(ARGS)

test: install
	$(BIN)/ruff check .
	$(MAKE) -s typecheck
	$(BIN)/python -m pytest -q $(ARGS)

# mypy on the files where they are, every error at its own path: crossover.sweeps is sweeps/ (pyproject.toml's
# package-dir), which no mypy flag can say, so .ci/typecheck.py hands mypy each file with its dotted name.
typecheck: install
	$(BIN)/python .ci/typecheck.py

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e '.[test]'
	touch $@
