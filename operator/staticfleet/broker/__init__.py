"""Kafka-wire-compatible broker: protocol server, topic log and HTTP API."""
