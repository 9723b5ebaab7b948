# make run    create .venv, install everything, run the main job (python sweeps/scaling.py) on a local Ray
# make test   create .venv, install everything, lint (ruff) and type-check (mypy) the package, run the tests but those
#             marked slow (make test ARGS=--all: every test, what CI runs)
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

# mypy finds modules by their dotted names in folders, and crossover.sweeps is sweeps/ (pyproject.toml's
# package-dir), so it checks the package as the wheel lays it out: setuptools copies the modules to build/typecheck
# (build_py, no wheel made), and each error line names the checkout's file again (crossover/sweeps/x.py -> sweeps/x.py).
typecheck: install
	rm -rf build/typecheck
	$(BIN)/python -c 'from setuptools import setup; setup()' -q build_py -d build/typecheck 2>/dev/null
	cd build/typecheck && ../../$(BIN)/mypy --config-file ../../pyproject.toml --cache-dir ../mypy-cache \
	    > ../mypy.txt; status=$$?; sed -E 's#^crossover/(sweeps|trainables|analysis)/#\1/#' ../mypy.txt; exit $$status

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e '.[test]'
	touch $@
