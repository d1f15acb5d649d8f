# staticfleet: the two commands that matter are `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
CACHE ?= $(HOME)/.cache/staticfleet
export STATICFLEET_CACHE := $(CACHE)

.PHONY: help venv test test-local lint typecheck unit clean browser dashboard-screenshots

help:
	@echo "make demo       the whole system on a local Kubernetes cluster: chart, fleet, rollout, scaling, summary"
	@echo "make demo-down  stop the demo"
	@echo "make test       run every test (lint, types, unit, conformance, e2e locally and on kind)"
	@echo "make test-local every test except the kind suite (no Docker needed)"
	@echo "make e2e        the end-to-end suite on a local Kubernetes control plane (or E2E_KUBECONFIG)"
	@echo "make kind-e2e   the end-to-end suite on a kind cluster (needs Docker)"
	@echo "make kind-up    a kind cluster with the project's images loaded; make kind-down deletes it"
	@echo "make images     staticfleet:0.1.0, staticfleet-consumer-example:0.1.0, staticfleet-streams-example:0.1.0 (needs Docker)"
	@echo "make kind-load  load the images into the kind cluster"
	@echo "make conformance  the differential suite against Apache Kafka"
	@echo "make lint       ruff"
	@echo "make typecheck  mypy"
	@echo "make unit       unit and component tests only"

# The venv is rebuilt when the project's dependencies change.
$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $@

venv: $(VENV)/.installed

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: venv
	$(VENV)/bin/mypy

unit: venv
	$(VENV)/bin/pytest operator/tests

# The heavy, cached prerequisites come first so their progress is visible: Kafka from Maven Central,
# Kubernetes binaries and helm from the Go module proxy. Then everything on the local cluster, then the
# e2e suite on kind (needs a Docker daemon: without one it says so and fails; `make test-local` skips it).
# With Docker reachable, kind's tools and images are prepared in the background meanwhile (cached; the
# scripts take locks, so the kind pass waits for what is still being built, and any failure shows there).
LOCAL_TESTS ?= test-local
test:
	@prepare=""; if docker info >/dev/null 2>&1; then \
		mkdir -p "$(CACHE)/kind"; \
		echo "kind: preparing tools and images in the background (log: $(CACHE)/kind/prepare.log)"; \
		{ e2e/kind/tools.sh && e2e/kind/images.sh project && e2e/kind/images.sh node; } \
			>"$(CACHE)/kind/prepare.log" 2>&1 & prepare=$$!; \
	fi; \
	status=0; $(MAKE) --no-print-directory $(LOCAL_TESTS) || status=$$?; \
	if [ -n "$$prepare" ]; then wait $$prepare || echo "kind: background preparation failed (retried below)"; fi; \
	[ $$status -eq 0 ] || exit $$status; \
	$(MAKE) --no-print-directory docker-check && $(MAKE) --no-print-directory kind-e2e

# The tests run on TEST_WORKERS pytest-xdist workers (each starts its own local cluster and brokers; the
# conformance scenarios stay together on one, as they run as one concurrent batch). Four keep both cores
# busy throughout (measured in docs/local-cluster.md). TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= 4
test-local: lint typecheck kafka-jars cluster-binaries helm promtool browser
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadgroup --durations=40 $(PYTEST_ARGS)

# The dashboard's browser tests drive Debian's chromium through its chromium-driver: system packages,
# which this only checks for (.ci/run installs them).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  echo "missing: chromium and chromedriver, for the dashboard's browser tests." >&2; \
	  echo "  install them with: apt-get install -y chromium chromium-driver" >&2; exit 1; }

# The dashboard's browser tests, writing their screenshots to docs/images (shown in docs/dashboard.md).
dashboard-screenshots: venv cluster-binaries kafka-jars browser
	STATICFLEET_DASHBOARD_SCREENSHOTS=docs/images $(VENV)/bin/pytest e2e/tests/operator/test_dashboard.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis

include e2e/e2e.mk

include e2e/kind/kind.mk

include conformance/conformance.mk

include charts/charts.mk
