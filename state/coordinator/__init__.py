"""Kafka's group-coordinator rules, one request at a time: the values (``model``), the requests,
the error codes, the settings, the rules and the handlers. Imports nothing else of ``state``."""
