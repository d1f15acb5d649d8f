"""`make demo`: the whole system installed the way users install it, then put through its paces.

A Kubernetes cluster (a local control plane with the pod runner, or the one $KUBECONFIG names), the Helm
chart (operator and embedded coordinator), a producer and a three-consumer StaticConsumerGroup; then a
rolling restart and scaling 3 -> 1 -> 4, each timed until the group is Stable again, and a summary of
what each operation cost, computed by `staticfleet analyze` from the coordinator's event log.

    python -m examples.demo up      # what `make demo` runs; leaves the demo running
    python -m examples.demo down    # what `make demo-down` runs
"""
