"""A local Kubernetes for tests: real etcd, kube-apiserver and kube-controller-manager processes
(built from the Go module proxy by e2e/cluster/build.sh) and a pod runner that plays the kubelet."""
