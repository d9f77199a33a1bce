"""Fixtures shared by the graphite tests."""
from tests.graphite.carbonlink_env import carbon_and_data  # noqa: F401 - a real carbon-cache holding points
