"""The Spark job: the streaming query, its state operator and its side effects."""
