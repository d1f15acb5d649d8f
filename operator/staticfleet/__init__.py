"""staticfleet: Kafka consumer fleets on Kubernetes with static group membership."""

__version__ = "0.1.0"
