#!/usr/bin/env bash
# A one-node kind cluster for the e2e suite and the demo.
#
#   cluster.sh up            create it unless it runs; prints the kubeconfig path (last line)
#   cluster.sh down          delete it, if this script created it
#   cluster.sh load IMAGE... kind load docker-image into it
#   cluster.sh kubeconfig    print the kubeconfig path
#   cluster.sh kind ARGS...  run the cached kind (with the host's workarounds)
#
#   KIND_CLUSTER      cluster name (default staticfleet: never kind's own default, `kind`, which is
#                     a developer's own cluster)
#   KIND_FRESH=1      `up` deletes a cluster of that name first: the e2e suite needs one with nothing
#                     left by an earlier run (a run killed midway leaves its releases and namespaces)
#
# It deletes only a cluster it created: at creation it records the node containers' ids in
# <cache>/<name>.created, and it deletes a cluster only while that record matches the containers kind
# labels with the cluster's name. Any other cluster of that name (made by hand, or deleted and made
# again since) is left alone, and `up` and `down` say so and fail.
#   KIND_NODE_IMAGE   node image to use; default: kind's own kindest/node when a registry is reachable,
#                     else one built here by images.sh (no registry needed)
#
# Host workarounds, each applied only where the host needs it (docs/local-cluster.md):
#   - Docker cannot grant --privileged: privileged-shim/docker rewrites kind's flag;
#   - cgroup v1: kubelet is told not to refuse it (failCgroupV1: false);
#   - the node image built here has no kindnetd: kind's CNI is off and a static ptp conflist is mounted.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${STATICFLEET_CACHE:-$HOME/.cache/staticfleet}/kind"
name="${KIND_CLUSTER:-staticfleet}"
kubeconfig="$cache/$name.kubeconfig"
marker="$cache/$name.created"
mkdir -p "$cache"

say() { echo "kind cluster: $*" >&2; }

docker info >/dev/null 2>&1 || {
	say "no Docker daemon is reachable (install and start one, e.g. Debian's docker.io; .ci/run does so in CI)"
	exit 2
}

kind_bin() { echo "$("$here/tools.sh" | tail -n1)/kind"; }

run_kind() {
	local kind
	kind="$(kind_bin)"
	if "$here/images.sh" privileged-refused; then
		PATH="$here/privileged-shim:$PATH" "$kind" "$@"
	else
		"$kind" "$@"
	fi
}

running() { [[ " $("$(kind_bin)" get clusters 2>/dev/null | tr '\n' ' ') " == *" $name "* ]]; }

# The ids of the cluster's node containers, as kind labels them (docker, so that stopped nodes count).
node_ids() { docker ps -aq --no-trunc --filter "label=io.x-k8s.kind.cluster=$name" | sort; }

created_here() { [[ -s "$marker" && "$(node_ids)" == "$(cat "$marker")" ]]; }

# Deletes the cluster if this script created it; otherwise says why not and fails.
delete() {
	if ! created_here; then
		say "cluster $name was not created by e2e/kind/cluster.sh (its node containers do not match $marker):"
		say "  leaving it alone. Set KIND_CLUSTER to another name, or delete it yourself: kind delete cluster --name $name"
		return 1
	fi
	run_kind delete cluster --name "$name" >&2
	rm -f "$marker" "$kubeconfig"
}

# kind's default node image, as its module names it (kindest/node:vX@sha256:...).
stock_image() {
	local dir
	dir="$(cd "$here/../cluster" && GOTOOLCHAIN=local go mod download -json "sigs.k8s.io/kind@$(sed -n 's/^KIND_VERSION=//p' "$here/tools.sh")" \
		| sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
	sed -n 's/^const Image = "\(.*\)"$/\1/p' "$dir/pkg/apis/config/defaults/image.go"
}

# The node containers of the cluster are all running (a daemon restart leaves them stopped).
nodes_running() {
	local node state
	for node in $("$(kind_bin)" get nodes --name "$name" 2>/dev/null); do
		state="$(docker inspect -f '{{.State.Running}}' "$node" 2>/dev/null || echo false)"
		[[ "$state" == true ]] || return 1
	done
}

up() {
	if running; then
		if [[ "${KIND_FRESH:-0}" == 1 ]]; then
			say "deleting cluster $name to start from a new one (KIND_FRESH=1)"
		elif nodes_running; then
			run_kind get kubeconfig --name "$name" >"$kubeconfig"
			echo "$kubeconfig"
			return
		else
			say "cluster $name has stopped nodes: deleting it"
		fi
		delete || exit 1
	fi
	local started=$SECONDS image="${KIND_NODE_IMAGE:-}" offline=0 config
	if [[ -z "$image" ]]; then
		image="$(stock_image)"
		if ! docker image inspect "$image" >/dev/null 2>&1 && ! timeout 120 docker pull "$image" >/dev/null 2>&1; then
			say "no registry reachable for $image: building a node image here"
			image="$("$here/images.sh" node | tail -n1)"
			offline=1
		fi
	elif [[ "$image" == staticfleet-local/* ]]; then
		offline=1
	fi
	config="$cache/$name.config.yaml"
	{
		echo "kind: Cluster"
		echo "apiVersion: kind.x-k8s.io/v1alpha4"
		if ((offline)); then
			echo "networking:"
			echo "  disableDefaultCNI: true"
		fi
		echo "nodes:"
		echo "  - role: control-plane"
		echo "    image: $image"
		if ((offline)); then
			echo "    extraMounts:"
			echo "      - hostPath: $here/ptp.conflist"
			echo "        containerPath: /etc/cni/net.d/10-staticfleet-ptp.conflist"
			echo "        readOnly: true"
		fi
		if [[ ! -f /sys/fs/cgroup/cgroup.controllers ]]; then
			echo "kubeadmConfigPatches:"
			echo "  - |"
			echo "    kind: KubeletConfiguration"
			echo "    failCgroupV1: false"
		fi
	} >"$config"
	say "creating cluster $name from $image"
	run_kind create cluster --name "$name" --config "$config" --kubeconfig "$kubeconfig" --wait 180s >&2
	node_ids >"$marker"
	say "cluster $name ready in $((SECONDS - started)) s"
	echo "$kubeconfig"
}

case "${1:-}" in
up) up ;;
down)
	if running; then delete || exit 1; else rm -f "$marker" "$kubeconfig"; fi
	;;
load)
	shift
	for image in "$@"; do run_kind load docker-image "$image" --name "$name" >&2; done
	;;
kubeconfig) echo "$kubeconfig" ;;
kind)
	shift
	run_kind "$@"
	;;
*)
	echo "usage: cluster.sh up|down|load IMAGE...|kubeconfig|kind ARGS..." >&2
	exit 2
	;;
esac
