"""The StaticConsumerGroup operator: pure builders (builders.py), the scale state machine (scaling.py),
status computation (status.py), the reconcile pass (reconcile.py) and the kopf wiring (handlers.py)."""
