"""Cross-check against Kafka's generated message classes, when Kafka's own jars and a JDK are
available."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from state.coordinator.model import GroupMetadataValue, MemberMetadata, OffsetAndMetadata
from state.formats.records import (
    decode_group_metadata_value,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
)
from tests.state.formats.records.offset_encoders import (
    encode_offset_commit_key,
    encode_offset_commit_value,
)

KAFKA_JARS = Path(__file__).resolve().parents[4] / ".runtime" / "jars" / "kafka"

KAFKA_HARNESS = r"""
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Optional;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.internals.ConsumerProtocol;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.coordinator.group.generated.*;

/** Reads "<type> <version> <json>" lines; prints the bytes Kafka's generated classes write. */
public class KafkaRecords {
    public static void main(String[] args) throws Exception {
        ObjectMapper om = new ObjectMapper();
        StringBuilder out = new StringBuilder();
        for (String line : Files.readAllLines(Paths.get(args[0]))) {
            String[] p = line.split(" ", 3);
            short v = Short.parseShort(p[1]);
            JsonNode n = om.readTree(p[2]);
            byte[] b;
            switch (p[0]) {
                case "LegacyOffsetCommitKey":
                    b = MessageUtil.toCoordinatorTypePrefixedBytes(
                        LegacyOffsetCommitKeyJsonConverter.read(n, v));
                    break;
                case "OffsetCommitKey":
                    b = MessageUtil.toCoordinatorTypePrefixedBytes(
                        OffsetCommitKeyJsonConverter.read(n, v));
                    break;
                case "GroupMetadataKey":
                    b = MessageUtil.toCoordinatorTypePrefixedBytes(
                        GroupMetadataKeyJsonConverter.read(n, v));
                    break;
                case "OffsetCommitValue":
                    b = MessageUtil.toVersionPrefixedBytes(
                        v, OffsetCommitValueJsonConverter.read(n, v));
                    break;
                case "GroupMetadataValue":
                    for (JsonNode m : n.get("members")) {
                        // The consumer's own serializer builds the subscription.
                        List<String> topics = new ArrayList<>();
                        m.get("subscribedTopics").forEach(t -> topics.add(t.asText()));
                        short sv = (short) m.get("subscriptionVersion").asInt();
                        List<TopicPartition> owned = new ArrayList<>();
                        for (String t : topics) owned.add(new TopicPartition(t, 0));
                        Subscription sub = sv == 0 ? new Subscription(topics)
                            : new Subscription(topics, null, owned, 7, Optional.of("rack"));
                        ByteBuffer buf = ConsumerProtocol.serializeSubscription(sub, sv);
                        byte[] raw = new byte[buf.remaining()];
                        buf.get(raw);
                        ((ObjectNode) m).put(
                            "subscription", Base64.getEncoder().encodeToString(raw));
                    }
                    b = MessageUtil.toVersionPrefixedBytes(
                        v, GroupMetadataValueJsonConverter.read(n, v));
                    break;
                default:
                    throw new IllegalArgumentException(p[0]);
            }
            StringBuilder hex = new StringBuilder();
            for (byte x : b) hex.append(String.format("%02x", x));
            out.append(hex).append('\n');
        }
        System.out.print(out);
    }
}
"""


def _kafka_offset_json(v: OffsetAndMetadata) -> dict[str, object]:
    return {
        "offset": v.offset,
        "leaderEpoch": v.leader_epoch,
        "metadata": v.metadata,
        "commitTimestamp": v.commit_timestamp_ms,
        "expireTimestamp": -1 if v.expire_timestamp_ms is None else v.expire_timestamp_ms,
    }


def _kafka_group_json(v: GroupMetadataValue, subscription_version: int) -> dict[str, object]:
    return {
        "protocolType": v.protocol_type,
        "generation": v.generation,
        "protocol": v.protocol,
        "leader": v.leader,
        "currentStateTimestamp": v.current_state_timestamp_ms,
        "members": [
            {
                "memberId": m.member_id,
                "groupInstanceId": m.group_instance_id,
                "clientId": m.client_id,
                "clientHost": m.client_host,
                "rebalanceTimeout": m.rebalance_timeout_ms,
                "sessionTimeout": m.session_timeout_ms,
                "subscribedTopics": list(m.subscribed_topics),
                "subscriptionVersion": subscription_version,
                "assignment": base64.b64encode(m.assignment).decode(),
            }
            for m in v.members
        ],
    }


# Starting a JVM takes seconds: kept out of the fast unit-test run, still run in CI.
@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("javac") is None
    or not (KAFKA_JARS / "kafka-group-coordinator-4.1.1.jar").exists(),
    reason="needs a JDK and Kafka's jars (resolved by the project's setup into .runtime/jars)",
)
def test_matches_kafka_generated_classes(tmp_path: Path) -> None:
    long_meta = "é" * 100  # 200 bytes: multi-byte compact length
    offsets = [
        (0, OffsetAndMetadata(42, -1, "", 1000)),
        (1, OffsetAndMetadata(42, -1, "m", 1000, 2000)),
        (1, OffsetAndMetadata(42, -1, "m", 1000)),
        (2, OffsetAndMetadata(-1, -1, long_meta, -1)),
        (3, OffsetAndMetadata(1 << 62, 7, "😀meta", 1_700_000_000_000)),
        (4, OffsetAndMetadata(1 << 62, 7, "😀meta", 1_700_000_000_000)),
        (4, OffsetAndMetadata(3, -1, long_meta, 5)),
    ]
    member = MemberMetadata("m1", "inst", "cid", "/1.2.3.4", 300_000, 45_000, ("t", "ü"), b"\x01")
    groups = []
    for version in range(5):
        m = member
        if version < 3:
            m = MemberMetadata("m1", None, "cid", "host", 45_000, 45_000, ("t",), b"")
        ts = 1234 if version >= 2 else -1
        groups.append((version, GroupMetadataValue("consumer", 9, "range", "m1", ts, (m, m))))
        groups.append((version, GroupMetadataValue("", 0, None, None, ts, ())))
    groups.append((4, GroupMetadataValue("consumer", 1, "r", "m1", 5, (member,) * 3)))

    lines = [
        'OffsetCommitKey 0 {"group":"g😀","topic":"t","partition":3}',
        'LegacyOffsetCommitKey 0 {"group":"g","topic":"","partition":-1}',
        'GroupMetadataKey 0 {"group":"grüppe"}',
    ]
    expected = [
        encode_offset_commit_key("g😀", "t", 3),
        encode_offset_commit_key("g", "", -1, version=0),
        encode_group_metadata_key("grüppe"),
    ]
    for version, ov in offsets:
        lines.append(f"OffsetCommitValue {version} {json.dumps(_kafka_offset_json(ov))}")
        expected.append(encode_offset_commit_value(ov, version=version))
    for version, gv in groups:
        lines.append(f"GroupMetadataValue {version} {json.dumps(_kafka_group_json(gv, 0))}")
        expected.append(encode_group_metadata_value(gv, version=version))
    # Decode-only: a v4 offset with Kafka 4.1's topicId tag; members with v3 subscriptions.
    topic_id_json = dict(_kafka_offset_json(OffsetAndMetadata(5, 1, "x", 6)))
    topic_id_json["topicId"] = "AAAAAAAAAAAAAAAAAAAAAQ"
    lines.append(f"OffsetCommitValue 4 {json.dumps(topic_id_json)}")
    lines.append(f"GroupMetadataValue 3 {json.dumps(_kafka_group_json(groups[6][1], 3))}")

    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "KafkaRecords.java").write_text(KAFKA_HARNESS, encoding="utf-8")
    classpath = f"{KAFKA_JARS}/*"
    subprocess.run(
        ["javac", "-cp", classpath, "KafkaRecords.java"], cwd=tmp_path, check=True, timeout=120
    )
    result = subprocess.run(
        ["java", "-cp", f"{classpath}:{tmp_path}", "KafkaRecords", str(tmp_path / "in.txt")],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    kafka = [bytes.fromhex(x) for x in result.stdout.split()]
    assert len(kafka) == len(expected) + 2
    for i, (ours, theirs) in enumerate(zip(expected, kafka, strict=False)):
        assert ours == theirs, lines[i]
    assert decode_offset_commit_value(kafka[-2]) == OffsetAndMetadata(5, 1, "x", 6)
    assert decode_group_metadata_value(kafka[-1]) == groups[6][1]
