#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kubectl and etcd from the Go module proxy,
# once per Kubernetes version, into ${STATICFLEET_CACHE:-$HOME/.cache/staticfleet}/k8s-<version>/bin.
#
# The version is the k8s.io/kubernetes requirement in go.mod (change it with gen-gomod.sh).
# A stamp file marks a finished build; with it present this script only prints the bin dir.
# GOMODCACHE and GOCACHE stay where `go env` puts them, so later builds reuse them.
#
# usage: build.sh            build if needed; last line of stdout is the bin directory
#        build.sh --print    print the bin directory without building
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
export GOTOOLCHAIN=local CGO_ENABLED=0

cache="${STATICFLEET_CACHE:-$HOME/.cache/staticfleet}"
version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ { print $2; exit }' go.mod)"
[[ "$version" =~ ^v1\.([0-9]+)\.[0-9]+$ ]] || { echo "build.sh: no k8s.io/kubernetes v1.x requirement in go.mod" >&2; exit 1; }
minor="${BASH_REMATCH[1]}"
bin="$cache/k8s-$version/bin"
stamp="$bin/.built"

if [[ "${1:-}" == "--print" ]]; then echo "$bin"; exit 0; fi
if [[ -f "$stamp" ]]; then echo "$bin"; exit 0; fi

mkdir -p "$cache/k8s-$version"
# One builder at a time (a test session and `make` may both ask for the binaries).
exec 9>"$cache/k8s-$version/.lock"
flock 9
if [[ -f "$stamp" ]]; then echo "$bin"; exit 0; fi

log="$cache/k8s-$version/build.log"
echo "cluster binaries: building Kubernetes $version (kube-apiserver, kube-controller-manager, kubectl, etcd)" >&2
echo "cluster binaries: go $(go env GOVERSION), GOMODCACHE=$(go env GOMODCACHE), GOCACHE=$(go env GOCACHE)" >&2
echo "cluster binaries: a cold build downloads ~1 GB of modules and compiles for several minutes; log: $log" >&2
started=$SECONDS

echo "cluster binaries: downloading modules" >&2
go mod download -x 2>"$log.download" || { tail -n 30 "$log.download" >&2; exit 1; }
echo "cluster binaries: modules ready after $((SECONDS - started)) s" >&2

# The proxy serves no commit id; the module's content hash from go.sum identifies the source instead.
source_hash="$(awk -v v="$version" '$1 == "k8s.io/kubernetes" && $2 == v { print $3; exit }' go.sum)"
# The tag time keeps the build reproducible (buildDate would otherwise change on every build).
tag_time="$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"Time": "\([^"]*\)".*/\1/p')"
tag_time="${tag_time:-1970-01-01T00:00:00Z}"
stamp_flags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	stamp_flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
	stamp_flags+=" -X $pkg.gitCommit=$source_hash -X $pkg.gitTreeState=clean -X $pkg.buildDate=$tag_time"
done

tmp_bin="$bin.partial"
rm -rf "$tmp_bin"
mkdir -p "$tmp_bin"
echo "cluster binaries: compiling (one go build for all four programs)" >&2
# -v lists each package as it is compiled: count them for a progress line every 250.
go build -v -trimpath -buildvcs=false -ldflags "-s -w$stamp_flags" -o "$tmp_bin/" \
	k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kubectl \
	./cmd/etcd \
	2>&1 | tee "$log" | awk '
		{ n++ }
		n % 250 == 0 { printf "cluster binaries: %d packages compiled\n", n > "/dev/stderr"; fflush("/dev/stderr") }' \
	|| { echo "cluster binaries: go build failed; last lines of $log:" >&2; tail -n 30 "$log" >&2; exit 1; }

"$tmp_bin/kube-apiserver" --version >&2
"$tmp_bin/kubectl" version --client >&2
"$tmp_bin/etcd" --version >&2
{
	echo "version=$version"
	echo "go=$(go env GOVERSION)"
	echo "seconds=$((SECONDS - started))"
	echo "go.sum=$(sha256sum go.sum | cut -d' ' -f1)"
} >"$tmp_bin/.built"
rm -rf "$bin"
mv "$tmp_bin" "$bin"
echo "cluster binaries: built in $((SECONDS - started)) s into $bin" >&2
ls -l "$bin" >&2
echo "$bin"
