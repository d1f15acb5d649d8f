"""The differential suite: every scenario on Apache Kafka (the oracle) and on staticfleet, compared.

`test_scenario[kafka-<name>]` runs the scenario on Kafka and checks the oracle-sanity expectations some
scenarios carry (they catch a broken driver). `test_scenario[staticfleet-<name>]` runs it on staticfleet
and requires the normalised outcome to equal Kafka's.
"""

from __future__ import annotations

import pytest

from conformance import recorded
from conformance.backends import KAFKA, STATICFLEET, staticfleet_coordinator_available, staticfleet_supports
from conformance.runner import ConformanceRun, outcome_diff
from conformance.scenario import Scenario, all_scenarios

SCENARIOS = all_scenarios()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
@pytest.mark.parametrize("backend", [KAFKA, STATICFLEET])
def test_scenario(backend: str, scenario: Scenario, conformance_run: ConformanceRun) -> None:
    if backend == STATICFLEET and not staticfleet_coordinator_available():
        pytest.skip("not run: the `staticfleet coordinator` command does not exist yet")
    if backend == STATICFLEET and not staticfleet_supports(scenario.settings):
        pytest.skip("not run: `staticfleet coordinator` has no listener, SASL and ACL settings yet")
    kafka = conformance_run.result(KAFKA, scenario)
    if kafka.error is not None:
        pytest.fail(f"scenario failed on Kafka:\n{kafka.error}", pytrace=False)
    assert kafka.outcome is not None
    if backend == KAFKA:
        if scenario.sanity is not None:
            scenario.sanity(kafka.outcome)
        known = recorded.outcomes().get(scenario.name)
        if known is not None and known != kafka.outcome:
            pytest.fail(
                "Kafka no longer answers as recorded in conformance/recorded-kafka.json (re-record with "
                f"`python -m conformance.runner --record {scenario.name}` if that is expected):\n"
                f"{outcome_diff(known, kafka.outcome)}"
            )
        return
    ours = conformance_run.result(STATICFLEET, scenario)
    if ours.error is not None:
        pytest.fail(f"scenario failed on staticfleet:\n{ours.error}", pytrace=False)
    assert ours.outcome is not None
    if ours.outcome != kafka.outcome:
        pytest.fail(f"staticfleet answers differ from Kafka's:\n{outcome_diff(kafka.outcome, ours.outcome)}")
