# Two commands: `make run` sets up and starts the collector with embedded defaults;
# `make test` sets up and runs the test suite (what .ci/run runs).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The modules mypyc compiles at install time (pyproject.toml's hooks.mypyc include list):
# an edit to one of them must reinstall, or the stale extension module would be imported.
COMPILED := $(patsubst /%,%,$(shell sed -n '/^include = \[/,/^\]/p' pyproject.toml | grep -o '/[a-z_/]*\.py'))
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml $(COMPILED) | cksum | cut -d' ' -f1)

.PHONY: run test bench setup clean

$(STAMP): pyproject.toml $(COMPILED)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/python -m pip install --quiet -e '.[lakehouse,test]'
	rm -f $(VENV)/.installed-* && touch $@

setup: $(STAMP)

run: $(STAMP)
	$(BIN)/ktc serve

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python tests/perf/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis *__mypyc*.so
	find collector proto quota exporters -name '*.so' -delete
