# The Helm chart and the demo that installs it the way users do (included by the main Makefile).
# The helm CLI is built from the Go module proxy and cached like the Kubernetes binaries.
.PHONY: helm promtool chart-lint chart-crds demo demo-down demo-ci

helm:
	@charts/build-helm.sh >/dev/null

# Prometheus' promtool, for `promtool check rules` and `promtool test rules` on the chart's alerts.
promtool:
	@charts/build-promtool.sh >/dev/null

chart-lint: helm
	"$$(charts/build-helm.sh --print)" lint --strict charts/staticfleet

# Helm installs only the CRD inside the chart: keep it a copy of crds/ (a test checks they are equal).
chart-crds:
	cp crds/*.yaml charts/staticfleet/crds/

# A cluster, the chart, a fleet and a producer; rollout, scale 3->1->4, summary. DEMO_CLUSTER=kind (the
# default when a Docker daemon is reachable and KUBECONFIG is unset) runs it on a kind cluster with the
# project's images; DEMO_CLUSTER=local on the local control plane, or on $KUBECONFIG's cluster if set.
# The demo has its own release and namespace (staticfleet-demo), apart from the README's `staticfleet`.
DEMO_CLUSTER ?= $(if $(KUBECONFIG),local,$(shell docker info >/dev/null 2>&1 && echo kind || echo local))

# A kind cluster that did not run before `make demo` is the demo's: the demo records it in its state
# file, and `make demo-down` deletes it. One that ran already (`make kind-up`) stays for `make kind-down`.
demo: venv cluster-binaries helm
ifeq ($(DEMO_CLUSTER),kind)
	@if e2e/kind/cluster.sh kind get clusters 2>/dev/null | grep -qx "$(KIND_CLUSTER)"; then created=""; \
	else created="--kind-cluster=$(KIND_CLUSTER)"; fi; \
	$(MAKE) --no-print-directory kind-up && \
	$(PY) -m examples.demo up --kubeconfig "$$(e2e/kind/cluster.sh kubeconfig)" $$created
else
	@$(PY) -m examples.demo up
endif

# Stops what `make demo` started, on the cluster it ran on (from the demo's state file, whatever
# KUBECONFIG or DEMO_CLUSTER say now).
demo-down: venv
	@$(PY) -m examples.demo down

# The demo's short form against the e2e suite's cluster, as CI runs it.
demo-ci: venv cluster-binaries helm
	$(VENV)/bin/pytest e2e/tests/chart/test_demo.py
