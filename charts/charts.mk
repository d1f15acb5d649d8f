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

# A local cluster (or $KUBECONFIG's), the chart, a fleet and a producer; rollout, scale 3->1->4, summary.
demo: venv cluster-binaries helm
	@$(PY) -m examples.demo up

demo-down: venv
	@$(PY) -m examples.demo down

# The demo's short form against the e2e suite's cluster, as CI runs it.
demo-ci: venv cluster-binaries helm
	$(VENV)/bin/pytest e2e/tests/chart/test_demo.py
