"""A soak harness: ``python -m tests.soak`` runs the job, the mirror and ``serve`` for minutes
or hours under steady load, with faults on a schedule, and checks at the end that nothing was
lost and that no resource keeps growing after warm-up.

What runs, each of its own (``services``): a 3-node KRaft cluster on free ports under
``.runtime/soak/kafka``, a durable throwaway PostgreSQL (``--sink postgres``, the default) or a
SQLite file, the job's driver as a process group (replication 3, min.insync.replicas 2, history
kept), the mirror of the same cluster's ``__consumer_offsets`` into the same database with the
table prefix ``mirror_``, and ``serve`` over the job's sink.

Modules: ``load`` (raw producers, the commit client and Kafka's own consumer groups, in a child
process), ``faults`` (the schedule, recovery times), ``sampling`` (per-window figures),
``growth`` (the resource-growth rule), ``verify`` (model vs sink vs offsets topic, mirror vs
Kafka), ``report`` (the tables).
"""
