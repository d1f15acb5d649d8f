#!/usr/bin/env bash
# Builds Prometheus' promtool from the Go module proxy, once per version, into
# ${STATICFLEET_CACHE:-$HOME/.cache/staticfleet}/promtool-<version>/bin, for `promtool check rules` on the
# chart's PrometheusRule (no release download needed).
#
# Prometheus publishes its Go module as v0.3<minor>.<patch> for release 3.<minor>.<patch> (v0.316.0 is
# Prometheus 3.16.0); its go.mod has
# no replace directives, so `go install github.com/prometheus/prometheus/cmd/promtool@<version>` works as
# is. The -X flags stamp the version `promtool --version` prints, as Prometheus' own build does.
# `-tags remove_all_sd` leaves out the service-discovery plugins (the cloud SDKs and client-go, most of
# the build): checking and testing rules needs none of them, and the cold build takes a fraction of
# the time.
#
# usage: build-promtool.sh            build if needed; last line of stdout is the promtool binary
#        build-promtool.sh --print    print the binary's path without building
set -euo pipefail
version="${PROMTOOL_VERSION:-v0.316.0}"
module="github.com/prometheus/prometheus"
export GOTOOLCHAIN=local CGO_ENABLED=0

cache="${STATICFLEET_CACHE:-$HOME/.cache/staticfleet}"
home="$cache/promtool-$version"
bin="$home/bin"
stamp="$bin/.built"

if [[ "${1:-}" == "--print" ]]; then echo "$bin/promtool"; exit 0; fi
if [[ -f "$stamp" ]]; then echo "$bin/promtool"; exit 0; fi

mkdir -p "$home"
exec 9>"$home/.lock"  # one builder at a time (a test session and `make` may both ask)
flock 9
if [[ -f "$stamp" ]]; then echo "$bin/promtool"; exit 0; fi

log="$home/build.log"
echo "promtool: building $module $version from the Go module proxy (go $(go env GOVERSION)); log: $log" >&2
started=$SECONDS
info="$(go mod download -json "$module@$version")" || {
	echo "promtool: cannot download $module@$version" >&2
	exit 1
}
source_hash="$(sed -n 's/^[[:space:]]*"Sum": "\([^"]*\)".*/\1/p' <<<"$info" | head -n1)"
[[ "$version" =~ ^v0\.3([0-9][0-9])\.([0-9]+)$ ]] || { echo "promtool: expected a v0.3XX.Y module version" >&2; exit 1; }
release="3.$((10#${BASH_REMATCH[1]})).${BASH_REMATCH[2]}"
echo "promtool: modules ready after $((SECONDS - started)) s; compiling Prometheus $release's promtool" >&2

stamp_pkg="github.com/prometheus/common/version"
ldflags="-s -w -X $stamp_pkg.Version=$release -X $stamp_pkg.Revision=$source_hash -X $stamp_pkg.Branch=module"
rm -rf "$bin.partial"
mkdir -p "$bin.partial"
GOBIN="$bin.partial" go install -tags remove_all_sd -trimpath -buildvcs=false -ldflags "$ldflags" "$module/cmd/promtool@$version" \
	>"$log" 2>&1 || { echo "promtool: go install failed; last lines of $log:" >&2; tail -n 30 "$log" >&2; exit 1; }
"$bin.partial/promtool" --version >&2
{
	echo "version=$version"
	echo "release=$release"
	echo "go=$(go env GOVERSION)"
	echo "tags=remove_all_sd"
	echo "seconds=$((SECONDS - started))"
	echo "sum=$source_hash"
} >"$bin.partial/.built"
rm -rf "$bin"
mv "$bin.partial" "$bin"
echo "promtool: built in $((SECONDS - started)) s: $bin/promtool" >&2
echo "$bin/promtool"
