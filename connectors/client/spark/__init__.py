"""The client's Spark helpers, the only part of ``connectors.client`` that imports pyspark: a
query's progress committed as a group's offsets (``progress``), and a query started from them
(``resume``)."""

from connectors.client.spark.progress import CommitProgressListener, commit_after_batch
from connectors.client.spark.resume import CheckpointExistsError, ResumedQuery, start_from_group

__all__ = [
    "CheckpointExistsError",
    "CommitProgressListener",
    "ResumedQuery",
    "commit_after_batch",
    "start_from_group",
]
