# Two commands: `make run` sets up and starts the collector with embedded defaults;
# `make test` sets up and runs the test suite (what .ci/run runs).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The modules mypyc compiles at install time (pyproject.toml's hooks.mypyc include list):
# an edit to one of them must reinstall, or the stale extension module would be imported.
COMPILED := $(patsubst /%,%,$(shell sed -n '/^include = \[/,/^\]/p' pyproject.toml | grep -o '/[a-z_/]*\.py'))
SOURCES_SUM := $(shell cat pyproject.toml $(COMPILED) | cksum | cut -d' ' -f1)
PACKAGES := collector proto quota exporters subscriptions clock
# Three installs into one .venv, each stamped with the sources it came from (an edit to
# pyproject.toml or to a compiled module redoes it):
# - RUN_STAMP (`make run`): what running needs, the package with its lakehouse extra (serve,
#   gateway, ingest, sql, report), interpreted: compiling the push path with mypyc is most of
#   a first install's time, and runs the same code (about 25 % more CPU per push, README).
#   A compiled install of the same sources serves as well.
# - STAMP (`make setup`; test, bench and fuzz): the same, compiled.
# - TEST_STAMP: the test extra on top (pytest, Playwright, atheris, the Helm SDK, Tansu, ruff,
#   mypy ...), its requirements only: the package is not built a second time.
RUN_STAMP  := $(VENV)/.installed-run-$(SOURCES_SUM)
STAMP      := $(VENV)/.installed-compiled-$(SOURCES_SUM)
TEST_STAMP := $(VENV)/.installed-test-$(SOURCES_SUM)

.PHONY: run test lint bench setup setup-test clean fuzz

$(STAMP): pyproject.toml $(COMPILED)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/python -m pip install --quiet -e '.[lakehouse]'
	rm -f $(VENV)/.installed-* && touch $@ $(RUN_STAMP)

# Extension modules of an older compiled install go: Python would import them in preference
# to the edited sources. --no-compile: byte code is written when a module is first imported,
# not for all of pyspark, pyarrow and matplotlib up front (a third of this install's CPU).
$(RUN_STAMP): pyproject.toml $(COMPILED)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	find $(PACKAGES) -name '*.so' -delete; rm -f *__mypyc*.so
	HATCH_BUILD_NO_HOOKS=true $(BIN)/python -m pip install --quiet --no-compile -e '.[lakehouse]'
	rm -f $(VENV)/.installed-* && touch $@

$(TEST_STAMP): $(STAMP)
	$(BIN)/python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["test"]))' >$(VENV)/test-requirements.txt
	$(BIN)/python -m pip install --quiet -r $(VENV)/test-requirements.txt
	touch $@

setup: $(STAMP)

setup-test: $(TEST_STAMP)

# What comes from outside the repository (Kafka's and Iceberg's jars, an OpenTelemetry
# Collector, Debian's postgresql, chromium and prometheus) is fetched once per machine by
# .ci/provision.py, one table of what, from where, into which cache (~/.cache/ktc, KTC_CACHE
# overrides it): `make NAME` provisions one entry, `.ci/provision.py --list` shows them all.
# What is there is skipped; without the tool to fetch it (mvn, go, apt-get as root), outside
# CI, the tests that need it skip instead.
PROVISION := $(PYTHON) .ci/provision.py
PROVISIONED := kafka-libs streams-libs lake-libs spark-kafka-libs otelcol kgo-client postgresql chromium prometheus
# The tests and `ktc` read where the caches are from KTC_KAFKA_LIBS, KTC_LAKE_LIBS,
# KTC_SPARK_KAFKA_LIBS, KTC_OTELCOL, KTC_KGO_CLIENT, KTC_STREAMS_LIBS.
$(foreach line,$(shell $(PROVISION) --env),$(eval export $(line)))

.PHONY: $(PROVISIONED)
$(PROVISIONED):
	@$(PROVISION) $@

run: $(RUN_STAMP)
	@$(PROVISION) lake-libs spark-kafka-libs
	$(BIN)/ktc serve

# Lint, format and type checks (README.md, "Development"); `make test` runs them first.
lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	@$(PROVISION) $(PROVISIONED)
	$(BIN)/python -m pytest

bench: $(TEST_STAMP)
	@$(PROVISION) kafka-libs lake-libs spark-kafka-libs
	$(BIN)/python tests/perf/run_all.py

# Coverage-guided fuzzing (docs/fuzzing.md): each of FUZZ_TARGETS for FUZZ_SECONDS (per
# target, default 300), starting from tests/fuzz/corpus/<target>; what it learns goes to
# build/fuzz/<target>, a crash to build/fuzz/<target>-crash-*; fails if any target crashed.
FUZZ_SECONDS ?= 300
FUZZ_TARGETS ?= serve_request serve_stream gateway_request gateway_response decompress otlp_metrics

fuzz: $(TEST_STAMP)
	@failed=; for target in $(FUZZ_TARGETS); do \
	  mkdir -p build/fuzz/$$target; echo "fuzz: $$target for $(FUZZ_SECONDS) s"; \
	  $(BIN)/python tests/fuzz/fuzz.py $$target build/fuzz/$$target tests/fuzz/corpus/$$target \
	    -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=1024 -max_len=65536 \
	    -artifact_prefix=build/fuzz/$$target- -print_final_stats=1 || failed="$$failed $$target"; \
	done; if [ -n "$$failed" ]; then echo "fuzz: crashes in$$failed (build/fuzz/)"; exit 1; fi

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis *__mypyc*.so
	find $(PACKAGES) -name '*.so' -delete
