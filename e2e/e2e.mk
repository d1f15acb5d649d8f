# Local Kubernetes for the e2e suite (included by the main Makefile).
# `eval "$(make -s cluster-up)"` starts it in the background and points kubectl at it.
.PHONY: cluster-binaries cluster-up cluster-down cluster-status e2e

cluster-binaries:
	@e2e/cluster/build.sh >/dev/null

cluster-up: venv cluster-binaries
	@$(PY) -m e2e.localcluster up

cluster-down: venv
	@$(PY) -m e2e.localcluster down

cluster-status: venv
	@$(PY) -m e2e.localcluster status

# Uses E2E_KUBECONFIG when set (kind or any cluster), else starts its own local cluster.
e2e: venv
	$(VENV)/bin/pytest e2e
