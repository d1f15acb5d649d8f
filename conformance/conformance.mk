# Differential conformance suite against Apache Kafka (included by the main Makefile).
# The Kafka version is the `kafka.version` property of conformance/kafka/pom.xml; jars are cached under
# $(STATICFLEET_CACHE)/kafka-<version>/lib.
.PHONY: kafka-jars kafka-broker conformance conformance-outcomes

# Resolve the Kafka broker, tools and logging jars from Maven Central (idempotent; a stamp skips it).
kafka-jars: venv
	@$(PY) -m conformance.kafka_broker provision

# A broker with the default scenario settings, for poking at by hand (Ctrl-C stops it).
kafka-broker: kafka-jars
	@$(PY) -m conformance.kafka_broker run

# Every scenario on Kafka and on staticfleet, compared; writes docs/conformance.md.
conformance: kafka-jars
	$(VENV)/bin/pytest conformance

# Print Kafka's normalised answers for some scenarios: make conformance-outcomes SCENARIOS="a b".
conformance-outcomes: kafka-jars
	@$(PY) -m conformance.runner $(SCENARIOS)
