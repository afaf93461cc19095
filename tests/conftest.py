"""Shared fixtures: real services come from session-scoped fixtures in ``tests/fixtures``."""

pytest_plugins = [
    "tests.fixtures.kafka",
    "tests.fixtures.spark",
    "tests.fixtures.postgres",
    "tests.fixtures.job",
    "tests.fixtures.kafka_secured",
]
