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

# The gateway tests' upstream: Apache Kafka 4.4.0's jars (KRaft broker and Java client), fetched
# once with Maven (tests/gateway/harness/pom.xml) into a cache outside the tree; the tests read
# KTC_KAFKA_LIBS (same default). Without mvn, outside CI, the gateway tests skip instead.
KTC_KAFKA_LIBS ?= $(HOME)/.cache/ktc/kafka-4.4.0
export KTC_KAFKA_LIBS
KAFKA_POM := tests/gateway/harness/pom.xml
KAFKA_LIBS_STAMP := $(KTC_KAFKA_LIBS)/.complete-$(shell cksum < $(KAFKA_POM) | cut -d' ' -f1)

.PHONY: kafka-libs
kafka-libs: $(KAFKA_LIBS_STAMP)

$(KAFKA_LIBS_STAMP): $(KAFKA_POM)
	@if ! command -v mvn >/dev/null && [ "$$CI" != true ]; then \
	  echo "kafka-libs: no mvn here, the gateway tests will skip"; exit 0; fi; \
	set -e; rm -rf '$(KTC_KAFKA_LIBS).tmp'; \
	mvn -q -B -f $(KAFKA_POM) dependency:copy-dependencies -DoutputDirectory='$(abspath $(KTC_KAFKA_LIBS)).tmp'; \
	rm -rf '$(KTC_KAFKA_LIBS)'; mv '$(KTC_KAFKA_LIBS).tmp' '$(KTC_KAFKA_LIBS)'; touch '$@'

# The forwarder's end-to-end tests (tests/exporters/test_otelcol.py) send to a real OpenTelemetry
# Collector, built once per machine with the OpenTelemetry Collector Builder from the manifest
# tests/exporters/otelcol/builder-config.yaml (Go modules only) into a cache outside the tree; the
# tests read KTC_OTELCOL (same default). About 6 minutes on 2 cores. Without go, outside CI, those
# tests skip instead.
OTELCOL_VERSION := 0.165.0
OTELCOL_MANIFEST := tests/exporters/otelcol/builder-config.yaml
OTELCOL_DIR ?= $(HOME)/.cache/ktc/otelcol-$(OTELCOL_VERSION)
KTC_OTELCOL ?= $(OTELCOL_DIR)/otelcol-ktc
export KTC_OTELCOL
OTELCOL_STAMP := $(OTELCOL_DIR)/.complete-$(shell cksum < $(OTELCOL_MANIFEST) | cut -d' ' -f1)

.PHONY: otelcol
otelcol: $(OTELCOL_STAMP)

# The stamp names the manifest's checksum: a fresh clone (every file new) does not rebuild.
$(OTELCOL_STAMP):
	@if ! command -v go >/dev/null && [ "$$CI" != true ]; then \
	  echo "otelcol: no go here, the OpenTelemetry Collector tests will skip"; exit 0; fi; \
	set -e; rm -rf '$(OTELCOL_DIR).tmp'; mkdir -p '$(OTELCOL_DIR).tmp'; \
	GOBIN='$(OTELCOL_DIR).tmp/bin' go install go.opentelemetry.io/collector/cmd/builder@v$(OTELCOL_VERSION); \
	cd '$(OTELCOL_DIR).tmp' && ./bin/builder --config='$(abspath $(OTELCOL_MANIFEST))' >builder.log 2>&1 \
	  || { tail -40 builder.log; exit 1; }; \
	mv build/otelcol-ktc . && rm -rf build bin; \
	rm -rf '$(OTELCOL_DIR)'; mv '$(OTELCOL_DIR).tmp' '$(OTELCOL_DIR)'; touch '$@'

# The lakehouse's jars beside PySpark's own: Apache Iceberg 1.12.0's Spark 4.1 runtime and the
# JDBC drivers of the Iceberg JDBC catalog (SQLite, PostgreSQL), fetched once with Maven
# (exporters/lakehouse/pom.xml) into a cache outside the tree.  `ktc ingest`, `ktc sql` (on
# Spark), `ktc thriftserver` and `ktc lake` read KTC_LAKE_LIBS (same default) at run time, so
# `make run` fetches them too.  Without mvn, outside CI, the Spark lakehouse tests skip.
KTC_LAKE_LIBS ?= $(HOME)/.cache/ktc/iceberg-1.12.0
export KTC_LAKE_LIBS
LAKE_POM := exporters/lakehouse/pom.xml
LAKE_LIBS_STAMP := $(KTC_LAKE_LIBS)/.complete-$(shell cksum < $(LAKE_POM) | cut -d' ' -f1)

.PHONY: lake-libs
lake-libs: $(LAKE_LIBS_STAMP)

# The stamp names the pom's checksum: a fresh clone (every file new) does not fetch again.
$(LAKE_LIBS_STAMP):
	@if ! command -v mvn >/dev/null && [ "$$CI" != true ]; then \
	  echo "lake-libs: no mvn here, the Spark lakehouse tests will skip"; exit 0; fi; \
	set -e; rm -rf '$(KTC_LAKE_LIBS).tmp'; \
	mvn -q -B -f $(LAKE_POM) dependency:copy-dependencies -DexcludeTransitive=true \
	  -DoutputDirectory='$(abspath $(KTC_LAKE_LIBS)).tmp'; \
	rm -rf '$(KTC_LAKE_LIBS)'; mv '$(KTC_LAKE_LIBS).tmp' '$(KTC_LAKE_LIBS)'; touch '$@'

# The PostgreSQL-catalog test (tests/lakehouse/test_lakehouse_end_to_end.py) starts a private
# cluster of Debian's postgresql (initdb, pg_ctl) as the postgres user.  Installed with apt when
# missing; without apt (or root), outside CI, that test skips instead.
PG_BIN := /usr/lib/postgresql/15/bin

.PHONY: postgresql
postgresql:
	@if [ -x $(PG_BIN)/pg_ctl ]; then exit 0; fi; \
	if ! command -v apt-get >/dev/null || [ "$$(id -u)" != 0 ]; then \
	  if [ "$$CI" = true ]; then echo "postgresql: $(PG_BIN) missing and no apt-get as root to install it"; exit 1; fi; \
	  echo "postgresql: no apt-get as root here, the PostgreSQL catalog test will skip"; exit 0; fi; \
	set -e; apt-get update -qq; \
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-15 >/dev/null

# The report's browser test (tests/lakehouse/test_report_browser.py) renders `ktc report` in
# Debian's chromium, driven by Playwright (never its own browser downloads). Installed with apt
# when missing; without apt (or root), outside CI, that test skips instead.
CHROMIUM := /usr/bin/chromium

.PHONY: chromium
chromium:
	@if [ -x $(CHROMIUM) ]; then exit 0; fi; \
	if ! command -v apt-get >/dev/null || [ "$$(id -u)" != 0 ]; then \
	  if [ "$$CI" = true ]; then echo "chromium: $(CHROMIUM) missing and no apt-get as root to install it"; exit 1; fi; \
	  echo "chromium: no apt-get as root here, the report's browser test will skip"; exit 0; fi; \
	set -e; apt-get update -qq; \
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null

# The /metrics/clients tests (tests/prometheus/) scrape the collector with a real Prometheus
# server and check the shipped alert rules with promtool: Debian's prometheus package (2.42 on
# bookworm). Installed with apt when missing; without apt (or root), outside CI, they skip.
PROMETHEUS := /usr/bin/prometheus

.PHONY: prometheus
prometheus:
	@if [ -x $(PROMETHEUS) ] && command -v promtool >/dev/null; then exit 0; fi; \
	if ! command -v apt-get >/dev/null || [ "$$(id -u)" != 0 ]; then \
	  if [ "$$CI" = true ]; then echo "prometheus: $(PROMETHEUS) missing and no apt-get as root to install it"; exit 1; fi; \
	  echo "prometheus: no apt-get as root here, the /metrics/clients tests will skip"; exit 0; fi; \
	set -e; apt-get update -qq; \
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null

run: $(RUN_STAMP) lake-libs
	$(BIN)/ktc serve

# Lint, format and type checks (README.md, "Development"); `make test` runs them first.
lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint kafka-libs lake-libs otelcol postgresql chromium prometheus
	$(BIN)/python -m pytest

bench: $(TEST_STAMP) kafka-libs lake-libs
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
