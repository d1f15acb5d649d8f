# The Helm chart and the demo that installs it the way users do (included by the main Makefile).
# The helm CLI is built from the Go module proxy and cached like the Kubernetes binaries.
.PHONY: helm chart-lint chart-crds demo demo-down demo-ci

helm:
	@charts/build-helm.sh >/dev/null

chart-lint: helm
	"$$(charts/build-helm.sh --print)" lint --strict charts/staticfleet

# Helm installs only the CRD inside the chart: keep it a copy of crds/ (a test checks they are equal).
chart-crds:
	cp crds/*.yaml charts/staticfleet/crds/

# A cluster, the chart, a fleet and a producer; rollout, scale 3->1->4, summary. DEMO_CLUSTER=kind (the
# default when a Docker daemon is reachable and KUBECONFIG is unset) runs it on a kind cluster with the
# project's images; DEMO_CLUSTER=local on the local control plane, or on $KUBECONFIG's cluster if set.
DEMO_CLUSTER ?= $(if $(KUBECONFIG),local,$(shell docker info >/dev/null 2>&1 && echo kind || echo local))

demo: venv cluster-binaries helm
ifeq ($(DEMO_CLUSTER),kind)
	@$(MAKE) --no-print-directory kind-up
	@$(PY) -m examples.demo up --kubeconfig "$$(e2e/kind/cluster.sh kubeconfig)"
else
	@$(PY) -m examples.demo up
endif

demo-down: venv
	@$(PY) -m examples.demo down
ifeq ($(DEMO_CLUSTER),kind)
	@$(MAKE) --no-print-directory kind-down
endif

# The demo's short form against the e2e suite's cluster, as CI runs it.
demo-ci: venv cluster-binaries helm
	$(VENV)/bin/pytest e2e/tests/chart/test_demo.py
