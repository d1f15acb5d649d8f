"""Kafka's security model for the embedded coordinator: listeners, TLS, SASL (PLAIN, SCRAM) and ACLs.

Every module here is pure (no sockets, no event loop) so that each rule of Kafka's behaviour has a unit test;
the server wires them to connections.
"""
