#!/usr/bin/env bash
# Builds what a kind cluster needs here from the Go module proxy, once per version, into
# ${STATICFLEET_CACHE:-$HOME/.cache/staticfleet}/kind/bin:
#   kind                                   sigs.k8s.io/kind
#   containerd, ctr, containerd-shim-runc-v2   github.com/containerd/containerd/v2 (static, no cgo)
#   crictl                                 sigs.k8s.io/cri-tools
#   coredns                                github.com/coredns/coredns (the version kubeadm expects)
#   local-path-provisioner                 github.com/rancher/local-path-provisioner
#   kubelet, kubeadm, kube-proxy, kube-scheduler, pause
#                                          e2e/cluster's module (the same Kubernetes as the local cluster)
# Each group has its own stamp, so a version change rebuilds only that group. GOCACHE and GOMODCACHE
# stay where `go env` puts them and are shared with e2e/cluster/build.sh and charts/build-helm.sh.
#
# usage: tools.sh            build what is missing; last line of stdout is the bin directory
#        tools.sh --print    print the bin directory without building
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export GOTOOLCHAIN=local CGO_ENABLED=0

KIND_VERSION=v0.33.0
CONTAINERD_VERSION=v2.3.4
CRICTL_VERSION=v1.36.0
COREDNS_VERSION=v1.14.2
# kind's own pin (v0.0.34) is not served by the module proxy; v0.0.30 is.
LOCAL_PATH_VERSION=v0.0.30

cache="${STATICFLEET_CACHE:-$HOME/.cache/staticfleet}/kind"
bin="$cache/bin"
if [[ "${1:-}" == "--print" ]]; then echo "$bin"; exit 0; fi
mkdir -p "$bin" "$cache/logs"
exec 9>"$cache/.tools.lock"  # one builder at a time
flock 9

say() { echo "kind tools: $*" >&2; }

# build NAME STAMP-CONTENT COMMAND...: runs COMMAND (GOBIN=$bin.partial-NAME) unless the stamp matches.
build() {
	local name="$1" want="$2"
	shift 2
	local stamp="$bin/.$name.built"
	if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then return 0; fi
	local log="$cache/logs/$name.log" started=$SECONDS out="$cache/partial-$name"
	say "building $name ($want); log: $log"
	rm -rf "$out"
	mkdir -p "$out"
	if ! GOBIN="$out" "$@" >"$log" 2>&1; then
		say "$name failed; last lines of $log:"
		tail -n 30 "$log" >&2
		exit 1
	fi
	mv "$out"/* "$bin"/
	rm -rf "$out"
	echo "$want" >"$stamp"
	say "$name built in $((SECONDS - started)) s"
}

flags=(-trimpath -buildvcs=false -ldflags "-s -w")

build kind "$KIND_VERSION" go install "${flags[@]}" "sigs.k8s.io/kind@$KIND_VERSION"

# The version flags containerd's Makefile sets, so `containerd --version` tells what runs.
containerd_ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
containerd_ldflags+=" -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2"
build containerd "$CONTAINERD_VERSION" go install -trimpath -buildvcs=false \
	-tags "no_aufs no_zfs no_btrfs no_devmapper" -ldflags "$containerd_ldflags" \
	"github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD_VERSION" \
	"github.com/containerd/containerd/v2/cmd/ctr@$CONTAINERD_VERSION" \
	"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION"

build crictl "$CRICTL_VERSION" go install -trimpath -buildvcs=false \
	-ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" \
	"sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"

build coredns "$COREDNS_VERSION" go install "${flags[@]}" "github.com/coredns/coredns@$COREDNS_VERSION"

build local-path-provisioner "$LOCAL_PATH_VERSION" go install "${flags[@]}" \
	"github.com/rancher/local-path-provisioner@$LOCAL_PATH_VERSION"

# The node's Kubernetes programs come from e2e/cluster's module, with the version stamps of
# e2e/cluster/build.sh, so kubeadm and kubelet report the version of the control plane images.
cluster="$here/../cluster"
k8s_version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ { print $2; exit }' "$cluster/go.mod")"
[[ "$k8s_version" =~ ^v1\.([0-9]+)\.[0-9]+$ ]] || { say "no k8s.io/kubernetes v1.x requirement in $cluster/go.mod"; exit 1; }
minor="${BASH_REMATCH[1]}"
node_programs() (
	cd "$cluster"
	local source_hash tag_time stamp_flags=""
	source_hash="$(awk -v v="$k8s_version" '$1 == "k8s.io/kubernetes" && $2 == v { print $3; exit }' go.sum)"
	tag_time="$(go mod download -json "k8s.io/kubernetes@$k8s_version" | sed -n 's/.*"Time": "\([^"]*\)".*/\1/p')"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		stamp_flags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
		stamp_flags+=" -X $pkg.gitCommit=$source_hash -X $pkg.gitTreeState=clean -X $pkg.buildDate=${tag_time:-1970-01-01T00:00:00Z}"
	done
	go build -trimpath -buildvcs=false -ldflags "-s -w$stamp_flags" -o "$GOBIN/" \
		k8s.io/kubernetes/cmd/kubelet \
		k8s.io/kubernetes/cmd/kubeadm \
		k8s.io/kubernetes/cmd/kube-proxy \
		k8s.io/kubernetes/cmd/kube-scheduler \
		./cmd/pause
)
build node "$k8s_version $(sha256sum "$cluster/go.sum" "$cluster/cmd/pause/main.go" | cut -c1-12 | tr '\n' ' ')" node_programs

echo "$bin"
