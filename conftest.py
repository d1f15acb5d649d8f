"""Settings shared by every suite: property tests run without Hypothesis's per-example deadline. The
suites share busy machines, and how fast code runs is measured in bench/, not asserted in tests."""

from hypothesis import settings

settings.register_profile("staticfleet", deadline=None)
settings.load_profile("staticfleet")
