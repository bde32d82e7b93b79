# Two commands: `make run` sets up and starts the collector with embedded defaults;
# `make test` sets up and runs the test suite (what .ci/run runs).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The modules mypyc compiles at install time (pyproject.toml's hooks.mypyc include list):
# an edit to one of them must reinstall, or the stale extension module would be imported.
COMPILED := $(patsubst /%,%,$(shell sed -n '/^include = \[/,/^\]/p' pyproject.toml | grep -o '/[a-z_/]*\.py'))
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml $(COMPILED) | cksum | cut -d' ' -f1)

.PHONY: run test lint bench setup clean fuzz

$(STAMP): pyproject.toml $(COMPILED)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/python -m pip install --quiet -e '.[lakehouse,test]'
	rm -f $(VENV)/.installed-* && touch $@

setup: $(STAMP)

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

run: $(STAMP)
	$(BIN)/ktc serve

# Lint, format and type checks (README.md, "Development"); `make test` runs them first.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint kafka-libs chromium
	$(BIN)/python -m pytest

bench: $(STAMP) kafka-libs
	$(BIN)/python tests/perf/run_all.py

# Coverage-guided fuzzing (docs/fuzzing.md): each of FUZZ_TARGETS for FUZZ_SECONDS (per
# target, default 300), starting from tests/fuzz/corpus/<target>; what it learns goes to
# build/fuzz/<target>, a crash to build/fuzz/<target>-crash-*; fails if any target crashed.
FUZZ_SECONDS ?= 300
FUZZ_TARGETS ?= serve_request serve_stream gateway_request gateway_response decompress otlp_metrics

fuzz: $(STAMP)
	@failed=; for target in $(FUZZ_TARGETS); do \
	  mkdir -p build/fuzz/$$target; echo "fuzz: $$target for $(FUZZ_SECONDS) s"; \
	  $(BIN)/python tests/fuzz/fuzz.py $$target build/fuzz/$$target tests/fuzz/corpus/$$target \
	    -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=1024 -max_len=65536 \
	    -artifact_prefix=build/fuzz/$$target- -print_final_stats=1 || failed="$$failed $$target"; \
	done; if [ -n "$$failed" ]; then echo "fuzz: crashes in$$failed (build/fuzz/)"; exit 1; fi

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis *__mypyc*.so
	find collector proto quota exporters subscriptions clock -name '*.so' -delete
