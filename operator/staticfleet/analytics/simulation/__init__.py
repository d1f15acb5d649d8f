"""Event logs from the real coordinator state machine, driven by virtual consumers in virtual time.

Each simulated group is a fleet of pods running a consumer that behaves like Kafka's Java client
(JoinGroup, SyncGroup with a range assignment from the leader, heartbeats, rejoin on
REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION), put through fleet operations under one of three membership
modes. The coordinator writes its event log; the simulated operator writes operator events.
"""

from staticfleet.analytics.simulation.params import MODES, SCENARIOS, SimulationParams
from staticfleet.analytics.simulation.runner import SimulationReport, simulate

__all__ = ["MODES", "SCENARIOS", "SimulationParams", "SimulationReport", "simulate"]
