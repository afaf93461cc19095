"""What a tenant's user sees of ``/metrics``' text: samples of its groups (either exporter's
group label, escaped values included) and of topics it may DESCRIBE; an operator sees all."""

from __future__ import annotations

from state.coordinator.acls import AclBinding
from streaming.serve.tenant_views import filter_exposition, viewer_of
from streaming.tenants import Tenant


def _rule(
    resource_type: str, pattern_type: str, name: str, permission: str = "ALLOW"
) -> AclBinding:
    return AclBinding.parse(
        {"resource_type": resource_type, "pattern_type": pattern_type, "resource_name": name,
         "operation": "DESCRIBE", "permission_type": permission}
    )  # fmt: skip


TEAM = Tenant(
    "team",
    "team.in",
    "team.out",
    (
        _rule("GROUP", "PREFIXED", 'a"'),
        _rule("GROUP", "LITERAL", 'a"deny', "DENY"),
        _rule("TOPIC", "LITERAL", "t1"),
    ),
)

TEXT = """# HELP kafka_consumergroup_lag lag
# TYPE kafka_consumergroup_lag gauge
kafka_consumergroup_lag{consumergroup="a\\"x",topic="t2",partition="0"} 1
kafka_consumergroup_lag{consumergroup="b",topic="t1",partition="0"} 1
kafka_consumergroup_group_lag{cluster_name="c",group="a\\"deny",topic="t1",partition="0"} 2
kafka_consumergroup_group_lag{cluster_name="c",group="a\\"y",topic="t1",partition="0"} 2
kafka_topic_partition_current_offset{topic="t1",partition="0"} 3
kafka_topic_partition_current_offset{topic="t2",partition="0"} 3
consumer_offsets_batches_total 4
"""


def test_a_tenant_sees_its_groups_and_topics_an_operator_everything() -> None:
    tenants = {"team": TEAM}
    shown = filter_exposition(TEXT, viewer_of({"user": "team"}, tenants)).splitlines()
    assert shown == [
        "# HELP kafka_consumergroup_lag lag",
        "# TYPE kafka_consumergroup_lag gauge",
        # The group decides for a group's series, whatever its topic.
        'kafka_consumergroup_lag{consumergroup="a\\"x",topic="t2",partition="0"} 1',
        'kafka_consumergroup_group_lag{cluster_name="c",group="a\\"y",topic="t1",partition="0"} 2',
        'kafka_topic_partition_current_offset{topic="t1",partition="0"} 3',
        "consumer_offsets_batches_total 4",
    ]
    for scope in ({"user": "ops"}, {}):  # no tenant of that name, or no users at all
        assert filter_exposition(TEXT, viewer_of(scope, tenants)) == TEXT
