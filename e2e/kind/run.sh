#!/usr/bin/env bash
# Runs the e2e suite on a kind cluster (needs Docker, kind and kubectl on PATH, and Go for helm).
# The image is built from the repository's Dockerfile and loaded into the cluster as
# staticfleet:e2e; tests find that name in E2E_IMAGE. Tests that read pod files on this host
# (marked `localcluster`) are deselected, because the real kubelet runs the pods here.
#
# usage: e2e/kind/run.sh [pytest args...]
#   KIND_CLUSTER=name   cluster name (default staticfleet-e2e)
#   KEEP_CLUSTER=1      keep the cluster afterwards
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cluster="${KIND_CLUSTER:-staticfleet-e2e}"
image="${E2E_IMAGE:-staticfleet:e2e}"
workdir="$(mktemp -d)"
kubeconfig="$workdir/kubeconfig"

cleanup() {
	if [[ "${KEEP_CLUSTER:-0}" != 1 ]]; then
		kind delete cluster --name "$cluster" >/dev/null 2>&1 || true
	fi
	rm -rf "$workdir"
}
trap cleanup EXIT

for tool in docker kind kubectl; do
	command -v "$tool" >/dev/null || { echo "run.sh: $tool is required" >&2; exit 2; }
done

"$repo/charts/build-helm.sh" >/dev/null  # the chart's tests use it (built once, cached)
kind create cluster --name "$cluster" --kubeconfig "$kubeconfig" --wait 120s
docker build -t "$image" "$repo"
kind load docker-image "$image" --name "$cluster"

cd "$repo"
E2E_KUBECONFIG="$kubeconfig" E2E_KUBECTL="$(command -v kubectl)" E2E_IMAGE="$image" \
	"${PYTHON:-$repo/.venv/bin/python}" -m pytest e2e "$@"
