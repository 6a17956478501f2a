# faultline's developer entry points. Every target bootstraps its own .venv.
#   make demo    create .venv, install, run the built-in demo (offline)
#   make test    create .venv with dev extras, run the whole test suite
#   make check   ruff, mypy --strict and the import-layer contract
#   make bench   the benchmarks recorded in docs/benchmarks.md

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RUN    := $(VENV)/.installed
DEV    := $(VENV)/.installed-dev

.PHONY: demo test check bench clean help

help:
	@sed -n 's/^#   //p' Makefile

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "faultline needs Python 3.11 or newer; set PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)

$(RUN): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e .
	@touch $@

$(DEV): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $@ $(RUN)

demo: $(RUN)
	$(BIN)/faultline demo --out out/demo

test: $(DEV)
	$(BIN)/python -m pytest -n auto --dist worksteal

check: $(DEV)
	$(BIN)/ruff check src tests scripts bench
	$(BIN)/ruff format --check src tests scripts bench
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: $(DEV)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache
