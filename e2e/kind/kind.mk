# A kind cluster for the e2e suite and the demo (included by the main Makefile). Everything it builds
# (kind, containerd, the node's Kubernetes programs, images) is cached; see docs/local-cluster.md.
# These targets need a reachable Docker daemon; they never install one (.ci/run does, in CI).
.PHONY: kind-tools kind-up kind-down images kind-load kind-e2e docker-check

# The project's own cluster name: never kind's default, `kind`, which is likely a developer's own cluster
# (and cluster.sh deletes only a cluster it created).
KIND_CLUSTER ?= staticfleet
export KIND_CLUSTER
# The Kafka version the conformance suite pins (conformance/kafka/pom.xml), for the kind tests' broker image.
KAFKA_VERSION := $(shell sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' conformance/kafka/pom.xml)
IMAGES := staticfleet:0.1.0 staticfleet-consumer-example:0.1.0 staticfleet-streams-example:0.1.0 \
	staticfleet-kafka:$(KAFKA_VERSION)

docker-check:
	@docker info >/dev/null 2>&1 || { \
		echo "No Docker daemon is reachable. Install and start one (Debian: apt-get install docker.io;"; \
		echo "then dockerd, or systemctl start docker), or run everything else: make test-local."; \
		exit 2; }

kind-tools:
	@e2e/kind/tools.sh >/dev/null

# Creates the cluster (and, with no registry reachable, its node image) and loads the project's images.
kind-up: docker-check kind-tools cluster-binaries images
	@e2e/kind/cluster.sh up >/dev/null
	@e2e/kind/cluster.sh load $(IMAGES)
	@echo "kind cluster $(KIND_CLUSTER) is up:  export KUBECONFIG=$$(e2e/kind/cluster.sh kubeconfig)"

kind-down:
	@if docker info >/dev/null 2>&1; then e2e/kind/cluster.sh down; fi

# staticfleet:0.1.0, staticfleet-consumer-example:0.1.0 and staticfleet-streams-example:0.1.0, as the
# README builds them, and staticfleet-kafka:<version> (Apache Kafka for the kind tests, e2e/kind/kafka).
images: docker-check
	@e2e/kind/images.sh project >/dev/null

kind-load: docker-check
	@e2e/kind/cluster.sh load $(IMAGES)

# The e2e suite on kind: the chart installed as the README says, fleets on a real kubelet. It starts
# from a new cluster (a running one may hold what an earlier, interrupted run installed; KIND_FRESH=0
# reuses it) and deletes it afterwards unless KEEP_CLUSTER=1.
kind-e2e: export KIND_FRESH ?= 1
kind-e2e: venv helm kind-up
	@status=0; E2E_CLUSTER=kind E2E_KUBECONFIG="$$(e2e/kind/cluster.sh kubeconfig)" \
		E2E_KUBECTL="$$(e2e/cluster/build.sh --print)/kubectl" \
		$(VENV)/bin/pytest e2e -m 'not localcluster' --durations=30 $(PYTEST_ARGS) || status=$$?; \
	if [ "$${KEEP_CLUSTER:-0}" != 1 ]; then e2e/kind/cluster.sh down; fi; exit $$status
