"""Rebalance analytics: the coordinator's event log in, tables, charts and a report out.

`staticfleet.analytics.pipeline` computes with Spark DataFrames (pyspark is imported only there and in
`session`); `staticfleet.analytics.simulation` produces event logs by driving the real coordinator state
machine with virtual consumers, and needs nothing beyond the standard library.
"""
