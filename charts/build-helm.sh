#!/usr/bin/env bash
# Builds the helm CLI from the Go module proxy, once per version, into
# ${STATICFLEET_CACHE:-$HOME/.cache/staticfleet}/helm-<version>/bin (no release download needed).
#
# helm's go.mod has no replace directives, so `go install helm.sh/helm/v3/cmd/helm@<version>` works
# as is. The -X flags are the ones helm's own Makefile sets: the version `helm version` prints, and the
# Kubernetes version (from helm's k8s.io/client-go requirement) that `helm lint` and `helm template`
# assume without a cluster.
#
# usage: build-helm.sh            build if needed; last line of stdout is the helm binary
#        build-helm.sh --print    print the binary's path without building
set -euo pipefail
version="${HELM_VERSION:-v3.21.4}"
module="helm.sh/helm/v3"
export GOTOOLCHAIN=local CGO_ENABLED=0

cache="${STATICFLEET_CACHE:-$HOME/.cache/staticfleet}"
home="$cache/helm-$version"
bin="$home/bin"
stamp="$bin/.built"

if [[ "${1:-}" == "--print" ]]; then echo "$bin/helm"; exit 0; fi
if [[ -f "$stamp" ]]; then echo "$bin/helm"; exit 0; fi

mkdir -p "$home"
exec 9>"$home/.lock"  # one builder at a time (a test session and `make` may both ask)
flock 9
if [[ -f "$stamp" ]]; then echo "$bin/helm"; exit 0; fi

log="$home/build.log"
echo "helm: building $version from the Go module proxy (go $(go env GOVERSION)); log: $log" >&2
started=$SECONDS
info="$(go mod download -json "$module@$version")" || { echo "helm: cannot download $module@$version" >&2; exit 1; }
field() { sed -n "s/^[[:space:]]*\"$1\": \"\\([^\"]*\\)\".*/\\1/p" <<<"$info" | head -n1; }
gomod="$(field GoMod)"
source_hash="$(field Sum)"
client_go="$(awk '$1 == "k8s.io/client-go" { print $2; exit }' "$gomod")"
[[ "$client_go" =~ ^v0\.([0-9]+)\.[0-9]+ ]] || { echo "helm: no k8s.io/client-go v0.x in $gomod" >&2; exit 1; }
k8s_minor="${BASH_REMATCH[1]}"
echo "helm: modules ready after $((SECONDS - started)) s; compiling (Kubernetes 1.$k8s_minor client libraries)" >&2

ldflags="-s -w -X $module/internal/version.version=$version"
ldflags+=" -X $module/internal/version.gitCommit=$source_hash -X $module/internal/version.gitTreeState=clean"
for pkg in pkg/lint/rules pkg/chartutil; do
	ldflags+=" -X $module/$pkg.k8sVersionMajor=1 -X $module/$pkg.k8sVersionMinor=$k8s_minor"
done

rm -rf "$bin.partial"
mkdir -p "$bin.partial"
GOBIN="$bin.partial" go install -trimpath -buildvcs=false -ldflags "$ldflags" "$module/cmd/helm@$version" \
	>"$log" 2>&1 || { echo "helm: go install failed; last lines of $log:" >&2; tail -n 30 "$log" >&2; exit 1; }
"$bin.partial/helm" version >&2
{
	echo "version=$version"
	echo "go=$(go env GOVERSION)"
	echo "seconds=$((SECONDS - started))"
	echo "sum=$source_hash"
} >"$bin.partial/.built"
rm -rf "$bin"
mv "$bin.partial" "$bin"
echo "helm: built in $((SECONDS - started)) s: $bin/helm" >&2
echo "$bin/helm"
