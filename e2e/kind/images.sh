#!/usr/bin/env bash
# The container images the kind cluster and the project need, built here without a container registry.
#
#   images.sh project     the project's images: staticfleet:0.1.0 (the Dockerfile),
#                         staticfleet-consumer-example:0.1.0 (examples/consumer) and
#                         staticfleet-streams-example:0.1.0 (examples/streams), IMAGE_TAG to change the tag;
#                         and the kind tests' Apache Kafka, staticfleet-kafka:<version>
#   images.sh streams     staticfleet-streams-example:0.1.0 alone
#   images.sh kafka       staticfleet-kafka:<version> alone: Apache Kafka (e2e/kind/kafka), the version the
#                         conformance suite pins, from its cached jars
#   images.sh debian      a Debian bookworm base image from debootstrap (the host's apt mirror)
#   images.sh python      a Debian-based stand-in for python:3.11-slim (python3.11 in a venv on PATH)
#   images.sh node        the kind node image: kind's base files, Debian's systemd/runc/CNI plugins,
#                         containerd and crictl from tools.sh, kubelet/kubeadm/kubectl, and every image
#                         kubeadm and kind's storage manifest name, built locally with the tags they expect
#   images.sh node-name   print the node image's name (builds nothing)
#
# Images are found by name and built only when missing; the names carry a hash of what went into
# them, so a change to a version or to this script builds a new one. Images built from registry-less
# sources trust the host's CA certificates, because package downloads inside `docker build` go through
# whatever TLS proxy the host uses.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${STATICFLEET_CACHE:-$HOME/.cache/staticfleet}/kind"
export DOCKER_BUILDKIT=0  # Debian's docker.io has no BuildKit

say() { echo "kind images: $*" >&2; }
have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# The Debian mirror the host's apt uses (its first deb822 or one-line source), unless DEBIAN_MIRROR is set.
debian_mirror() {
	if [[ -n "${DEBIAN_MIRROR:-}" ]]; then echo "$DEBIAN_MIRROR"; return; fi
	local found
	found="$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '$1 == "URIs:" && $2 !~ /security/ { print $2; exit }')"
	[[ -n "$found" ]] || found="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
		| awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; exit } }')"
	[[ -n "$found" ]] || { say "no Debian mirror in the host's apt sources; set DEBIAN_MIRROR"; exit 1; }
	echo "$found"
}

host_ca() {
	local ca=/etc/ssl/certs/ca-certificates.crt
	[[ -f "$ca" ]] || { say "$ca is missing (install ca-certificates)"; exit 1; }
	echo "$ca"
}

DEBIAN_IMAGE=staticfleet-local/debian:bookworm

ensure_debian() {
	have_image "$DEBIAN_IMAGE" && return 0
	local tarball="$cache/debian-bookworm-minbase.tar"
	if [[ ! -f "$tarball" ]]; then
		command -v debootstrap >/dev/null || { say "debootstrap is required (apt-get install debootstrap)"; exit 2; }
		local root="$cache/debootstrap.partial" mirror started=$SECONDS
		mirror="$(debian_mirror)"
		say "debootstrap --variant=minbase bookworm from $mirror"
		rm -rf "$root"
		debootstrap --variant=minbase bookworm "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 \
			|| { tail -n 20 "$cache/debootstrap.log" >&2; exit 1; }
		# The image's apt uses the same mirror; no package lists or caches are kept.
		echo "deb $mirror bookworm main" >"$root/etc/apt/sources.list"
		rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
		tar -C "$root" -cf "$tarball.partial" .
		mv "$tarball.partial" "$tarball"
		rm -rf "$root"
		say "debootstrap done in $((SECONDS - started)) s"
	fi
	docker import "$tarball" "$DEBIAN_IMAGE" >/dev/null
	say "imported $DEBIAN_IMAGE"
}

# build TAG CONTEXT-DIR: docker build of CONTEXT-DIR/Dockerfile, quietly, with the log on failure.
build() {
	local tag="$1" context="$2" log="$cache/logs/build-${1//[^a-zA-Z0-9]/_}.log"
	mkdir -p "$cache/logs"
	docker build --network=bridge -t "$tag" "$context" >"$log" 2>&1 || {
		say "docker build $tag failed; last lines of $log:"
		tail -n 30 "$log" >&2
		exit 1
	}
}

PYTHON_IMAGE=staticfleet-local/python:3.11-bookworm

# A stand-in for python:3.11-slim: `python` and `pip` on PATH (a venv, since Debian's own Python is
# externally managed), pip trusting the host's CA certificates.
ensure_python() {
	have_image "$PYTHON_IMAGE" && return 0
	ensure_debian
	local context
	context="$(mktemp -d)"
	cp "$(host_ca)" "$context/host-ca.crt"
	cat >"$context/Dockerfile" <<-EOF
		FROM $DEBIAN_IMAGE
		COPY host-ca.crt /usr/local/share/ca-certificates/host-ca.crt
		RUN apt-get update \\
		    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
		       ca-certificates python3 python3-venv \\
		    && update-ca-certificates \\
		    && rm -rf /var/lib/apt/lists/* \\
		    && python3 -m venv /usr/local/python
		ENV PATH=/usr/local/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
		    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \\
		    LANG=C.UTF-8
		CMD ["python3"]
	EOF
	say "building $PYTHON_IMAGE"
	build "$PYTHON_IMAGE" "$context"
	rm -rf "$context"
}

kind_module_dir() {
	(cd "$here/../cluster" && GOTOOLCHAIN=local go mod download -json "sigs.k8s.io/kind@$(kind_version)") \
		| sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p'
}
kind_version() { sed -n 's/^KIND_VERSION=//p' "$here/tools.sh"; }
k8s_version() { awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ { print $2; exit }' "$here/../cluster/go.mod"; }

# The node image's name: the Kubernetes version plus a hash of everything that goes into it.
node_image_name() {
	local hash
	hash="$(cat "$here/images.sh" "$here/tools.sh" "$here/node-init" "$here/storage_manifest.py" \
		"$here/../cluster/go.sum" "$here/../cluster/cmd/pause/main.go" | sha256sum | cut -c1-12)"
	echo "staticfleet-local/kind-node:$(k8s_version)-$hash"
}

# Does this host refuse `docker run --privileged`? (Its capability bounding set may lack a capability
# Docker grants a privileged container, e.g. CAP_SYS_RESOURCE in some sandboxes.)
privileged_refused() {
	! docker run --rm --privileged "$DEBIAN_IMAGE" true >/dev/null 2>&1
}

ensure_node() {
	local name
	name="$(node_image_name)"
	have_image "$name" && { echo "$name"; return 0; }
	ensure_debian
	local started=$SECONDS bin cluster_bin kind_dir version context
	bin="$("$here/tools.sh" | tail -n1)"
	cluster_bin="$("$repo/e2e/cluster/build.sh" | tail -n1)"
	kind_dir="$(kind_module_dir)"
	version="$(k8s_version)"
	[[ -d "$kind_dir/images/base/files" ]] || { say "kind's base files not found in $kind_dir"; exit 1; }
	context="$(mktemp -d)"
	trap 'rm -rf "$context"' RETURN

	# 1. The base: kind's files (entrypoint, systemd units, containerd config) on Debian.
	local base="staticfleet-local/kind-base:${name##*:}"
	if ! have_image "$base"; then
		say "building the node's base image"
		mkdir -p "$context/base/bin"
		cp -r "$kind_dir/images/base/files" "$context/base/files"
		chmod -R u+w "$context/base/files"
		cp "$bin/containerd" "$bin/ctr" "$bin/containerd-shim-runc-v2" "$bin/crictl" "$context/base/bin/"
		cp "$(host_ca)" "$context/base/host-ca.crt"
		local oom_setting=false
		# runc cannot set a negative oom_score_adj without CAP_SYS_RESOURCE: let containerd keep it >= its own.
		if privileged_refused; then oom_setting=true; fi
		cat >"$context/base/Dockerfile" <<-EOF
			FROM $DEBIAN_IMAGE
			COPY host-ca.crt /usr/local/share/ca-certificates/host-ca.crt
			RUN apt-get update \\
			    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
			       systemd conntrack iptables nftables iproute2 ethtool util-linux mount kmod libseccomp2 \\
			       pigz fuse-overlayfs e2fsprogs bash ca-certificates curl jq procps runc \\
			       containernetworking-plugins \\
			    && update-ca-certificates \\
			    && rm -rf /var/lib/apt/lists/* \\
			    && mkdir -p /opt/cni/bin \\
			    && for plugin in host-local loopback ptp bridge portmap; do \\
			         ln -s /usr/lib/cni/\$plugin /opt/cni/bin/\$plugin; done \\
			    && ln -s /usr/sbin/runc /usr/local/sbin/runc
			COPY files/usr/local/bin/ /usr/local/bin/
			COPY files/kind/ /kind/
			COPY files/etc/ /etc/
			COPY bin/ /usr/local/bin/
			RUN chmod 0755 /usr/local/bin/* /kind/bin/* \\
			    && sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = $oom_setting/' /etc/containerd/config.toml \\
			    && ctr oci spec \\
			       | jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \\
			       | jq 'del(.process.rlimits)' >/etc/containerd/cri-base.json \\
			    && find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete \\
			    && rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \\
			       /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \\
			       /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/* \\
			    && echo ReadKMsg=no >>/etc/systemd/journald.conf \\
			    && ln -sf /usr/lib/systemd/systemd /sbin/init \\
			    && systemctl enable kubelet.service containerd.service undo-mount-hacks.service \\
			    && systemctl mask systemd-binfmt.service \\
			    && mkdir -p /etc/kubernetes/manifests
			COPY node-init /usr/local/bin/staticfleet-node-init
			RUN chmod 0755 /usr/local/bin/staticfleet-node-init
			ENV container=docker
			STOPSIGNAL SIGRTMIN+3
			ENTRYPOINT ["/usr/local/bin/staticfleet-node-init", "/usr/local/bin/entrypoint", "/sbin/init"]
		EOF
		cp "$here/node-init" "$context/base/node-init"
		build "$base" "$context/base"
	fi

	# 2. Every image kubeadm and kind's storage manifest name, with the exact tags they expect.
	say "building the control plane and add-on images"
	local images="$context/images" list=()
	mkdir -p "$images"
	image_from_scratch() {  # TAG PROGRAM-PATH [ENTRYPOINT-NAME]
		local tag="$1" program="$2" entry="${3:-$(basename "$2")}" dir
		dir="$(mktemp -d -p "$images")"
		cp "$program" "$dir/$entry"
		printf 'FROM scratch\nCOPY %s /usr/local/bin/%s\nENV PATH=/usr/local/bin\nENTRYPOINT ["/usr/local/bin/%s"]\n' \
			"$entry" "$entry" "$entry" >"$dir/Dockerfile"
		build "$tag" "$dir"
		list+=("$tag")
	}
	local kubeadm_images
	kubeadm_images="$("$bin/kubeadm" config images list --kubernetes-version "$version" 2>/dev/null)"
	image_tag() { grep -m1 "/$1:" <<<"$kubeadm_images"; }
	image_from_scratch "$(image_tag kube-apiserver)" "$cluster_bin/kube-apiserver"
	image_from_scratch "$(image_tag kube-controller-manager)" "$cluster_bin/kube-controller-manager"
	image_from_scratch "$(image_tag kube-scheduler)" "$bin/kube-scheduler"
	image_from_scratch "$(image_tag etcd)" "$cluster_bin/etcd"
	image_from_scratch "$(image_tag coredns)" "$bin/coredns" coredns
	# kubeadm's pause tag and containerd's sandbox image (kind's config) may differ: tag both.
	image_from_scratch "$(image_tag pause)" "$bin/pause"
	docker tag "$(image_tag pause)" registry.k8s.io/pause:3.10
	list+=(registry.k8s.io/pause:3.10)

	# kube-proxy programs iptables/nftables: a Debian base with them.
	local proxy_dir="$images/proxy"
	mkdir -p "$proxy_dir"
	cp "$bin/kube-proxy" "$proxy_dir/"
	cat >"$proxy_dir/Dockerfile" <<-EOF
		FROM $base
		COPY kube-proxy /usr/local/bin/kube-proxy
		ENTRYPOINT ["/usr/local/bin/kube-proxy"]
	EOF
	build "$(image_tag kube-proxy)" "$proxy_dir"
	list+=("$(image_tag kube-proxy)")

	# kind's default StorageClass: its manifest and images, with the provisioner built by tools.sh.
	local storage_go="$kind_dir/pkg/build/nodeimage/const_storage.go" manifest="$context/default-storage.yaml"
	python3 "$here/storage_manifest.py" "$storage_go" >"$manifest"
	local provisioner_tag helper_tag
	provisioner_tag="$(awk '$1 == "image:" && $2 ~ /local-path-provisioner/ { print $2; exit }' "$manifest")"
	helper_tag="$(awk '$1 == "image:" && $2 ~ /local-path-helper/ { print $2; exit }' "$manifest")"
	image_from_scratch "$provisioner_tag" "$bin/local-path-provisioner"
	docker tag "$DEBIAN_IMAGE" "$helper_tag"
	list+=("$helper_tag")

	docker save "${list[@]}" -o "$context/images.tar"

	# 3. The node: the base plus the Kubernetes programs and the images imported into containerd.
	say "assembling the node image"
	local node
	node="$(docker run -d --entrypoint=sleep "$base" infinity)"
	{
		docker cp "$bin/kubeadm" "$node:/usr/bin/kubeadm"
		docker cp "$bin/kubelet" "$node:/usr/bin/kubelet"
		docker cp "$cluster_bin/kubectl" "$node:/usr/bin/kubectl"
		docker exec "$node" mkdir -p /kind/manifests
		docker exec "$node" sh -c "echo $version >/kind/version"
		docker cp "$manifest" "$node:/kind/manifests/default-storage.yaml"
		docker cp "$context/images.tar" "$node:/kind/images.tar"
		docker exec "$node" sh -c '
			set -e
			containerd >/tmp/containerd.log 2>&1 &
			for _ in $(seq 100); do ctr version >/dev/null 2>&1 && break; sleep 0.1; done
			ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned \
				--all-platforms --no-unpack --digests - </kind/images.tar >/dev/null
			kill $! && wait $! || true
			rm -f /kind/images.tar /tmp/containerd.log'
		docker commit \
			--change 'ENTRYPOINT ["/usr/local/bin/staticfleet-node-init", "/usr/local/bin/entrypoint", "/sbin/init"]' \
			--change 'CMD []' "$node" "$name" >/dev/null
	} || { docker rm -f "$node" >/dev/null; exit 1; }
	docker rm -f "$node" >/dev/null
	# Older node and base images (other inputs) are not used again.
	docker images --format '{{.Repository}}:{{.Tag}}' 'staticfleet-local/kind-*' \
		| grep -vxF -e "$name" -e "$base" | xargs -r docker rmi >/dev/null 2>&1 || true
	say "node image $name built in $((SECONDS - started)) s"
	echo "$name"
}

# The project's images, as the README builds them, from BASE_IMAGE: python:3.11-slim where it is present
# or can be pulled, else the local stand-in. Docker's layer cache makes an unchanged rebuild quick.
ensure_project() {
	local tag="${IMAGE_TAG:-0.1.0}" base="${BASE_IMAGE:-}"
	if [[ -z "$base" ]]; then
		base=python:3.11-slim
		if ! have_image "$base" && ! timeout 120 docker pull "$base" >/dev/null 2>&1; then
			# Tagged with the Dockerfile's default, so `docker build .` as the README says works here too.
			say "no registry reachable for $base: tagging the local stand-in $PYTHON_IMAGE as $base"
			ensure_python
			docker tag "$PYTHON_IMAGE" "$base"
		fi
	fi
	say "building staticfleet:$tag and staticfleet-consumer-example:$tag from $base, staticfleet-streams-example:$tag"
	docker build --build-arg "BASE_IMAGE=$base" -t "staticfleet:$tag" "$repo" >"$cache/logs/build-project.log" 2>&1 \
		|| { tail -n 30 "$cache/logs/build-project.log" >&2; exit 1; }
	docker build --build-arg "BASE_IMAGE=$base" -t "staticfleet-consumer-example:$tag" "$repo/examples/consumer" \
		>"$cache/logs/build-consumer.log" 2>&1 || { tail -n 30 "$cache/logs/build-consumer.log" >&2; exit 1; }
	ensure_streams "$tag"
	local kafka
	kafka="$(ensure_kafka)"
	echo "staticfleet:$tag staticfleet-consumer-example:$tag staticfleet-streams-example:$tag $kafka"
}

# The example Kafka Streams application, built by Maven inside its Dockerfile on the Debian base. Maven runs
# on this host first (conformance/java_build.py, a cached build of the same pom), which fills the Maven
# repository under the cache; a copy of it in the build context makes the build inside Docker offline, so
# no build downloads anything again. Docker's layer cache skips the Maven step when nothing changed.
ensure_streams() {
	local tag="$1" context m2 started=$SECONDS
	ensure_debian
	command -v mvn >/dev/null || { say "mvn is required to prepare the Maven repository (apt-get install maven)"; exit 2; }
	(cd "$repo" && python3 -m conformance.java_build build examples/streams) >"$cache/logs/build-streams-maven.log" 2>&1 \
		|| { tail -n 30 "$cache/logs/build-streams-maven.log" >&2; exit 1; }
	m2="$(cd "$repo" && python3 -m conformance.java_build repository)"
	context="$(mktemp -d -p "$cache")"
	cp -r "$repo/examples/streams/pom.xml" "$repo/examples/streams/src" "$repo/examples/streams/Dockerfile" \
		"$repo/examples/streams/.dockerignore" "$context/"
	# Hard links where the cache and the context share a file system (they do: both are in the cache).
	cp -al "$m2" "$context/m2" 2>/dev/null || cp -r "$m2" "$context/m2"
	docker build --network=bridge --build-arg "BASE_IMAGE=$DEBIAN_IMAGE" -t "staticfleet-streams-example:$tag" \
		"$context" >"$cache/logs/build-streams.log" 2>&1 || {
		rm -rf "$context"
		tail -n 30 "$cache/logs/build-streams.log" >&2
		exit 1
	}
	rm -rf "$context"
	say "staticfleet-streams-example:$tag built in $((SECONDS - started)) s"
}

# Apache Kafka for the kind tests (e2e/kind/kafka): Debian's JRE 17 and the jars conformance/kafka_jars.py
# resolves from Maven Central into the cache (the conformance suite's broker runs from the same jars).
# Built only when the image is missing or its inputs changed: a label on it records their digest. Prints
# the image's name.
ensure_kafka() {
	local version lib tag inputs context started=$SECONDS
	version="$(cd "$repo" && python3 -m conformance.kafka_jars version)"
	tag="staticfleet-kafka:$version"
	lib="$(cd "$repo" && python3 -m conformance.kafka_jars lib)" || { say "resolving the Kafka jars failed"; exit 1; }
	inputs="$({ cat "$here/kafka/Dockerfile" "$here/kafka/kafka-start" "$here/kafka/log4j2.xml" "$lib/../.resolved"
		ls "$lib"; } | sha256sum | cut -c1-12)"
	if [[ "$(docker image inspect -f '{{index .Config.Labels "io.staticfleet.inputs"}}' "$tag" 2>/dev/null)" == "$inputs" ]]; then
		echo "$tag"
		return 0
	fi
	ensure_debian
	context="$(mktemp -d -p "$cache")"
	cp -p "$here/kafka/Dockerfile" "$here/kafka/kafka-start" "$here/kafka/log4j2.xml" "$context/"
	# Hard links where the cache and the context share a file system (they do: both are in the cache).
	cp -al "$lib" "$context/lib" 2>/dev/null || cp -r "$lib" "$context/lib"
	docker build --network=bridge --build-arg "BASE_IMAGE=$DEBIAN_IMAGE" --label "io.staticfleet.inputs=$inputs" \
		-t "$tag" "$context" >"$cache/logs/build-kafka.log" 2>&1 || {
		rm -rf "$context"
		tail -n 30 "$cache/logs/build-kafka.log" >&2
		exit 1
	}
	rm -rf "$context"
	say "$tag built in $((SECONDS - started)) s"
	echo "$tag"
}

# One builder at a time (`make test` prepares these in the background while the local suite runs).
mkdir -p "$cache/logs"
case "${1:-}" in node-name | privileged-refused) ;; *)
	exec 8>"$cache/.images.lock"
	flock 8
	;;
esac

case "${1:-}" in
project) ensure_project ;;
streams) ensure_streams "${IMAGE_TAG:-0.1.0}"; echo "staticfleet-streams-example:${IMAGE_TAG:-0.1.0}" ;;
kafka) ensure_kafka ;;
debian) ensure_debian; echo "$DEBIAN_IMAGE" ;;
python) ensure_python; echo "$PYTHON_IMAGE" ;;
node) ensure_node ;;
node-name) node_image_name ;;
privileged-refused) ensure_debian; privileged_refused ;;
*) echo "usage: images.sh project|streams|kafka|debian|python|node|node-name|privileged-refused" >&2; exit 2 ;;
esac
