"""Record types of ``__consumer_offsets``: the table against Kafka's own enum, and the
classification of keys of every type."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from state.formats.records import (
    RECORD_TYPES,
    RecordFormatError,
    classify_key,
    encode_group_metadata_key,
    record_type_name,
)
from state.formats.records.wire import INT16
from tests.state.formats.records.offset_encoders import encode_offset_commit_key

KAFKA_JARS = Path(__file__).resolve().parents[4] / ".runtime" / "jars" / "kafka"

_PRINT_TYPES = """
import org.apache.kafka.coordinator.group.generated.CoordinatorRecordType;

public class PrintTypes {
    public static void main(String[] args) {
        for (CoordinatorRecordType t : CoordinatorRecordType.values()) {
            System.out.println(t.id() + " " + t);
        }
    }
}
"""


def _key(type_id: int, group: bytes, rest: bytes = b"") -> bytes:
    return INT16.pack(type_id) + INT16.pack(len(group)) + group + rest


def test_classic_keys_are_classified_with_their_group() -> None:
    assert classify_key(encode_offset_commit_key("grüppe", "t", 3)) == (1, "OffsetCommit", "grüppe")
    assert classify_key(encode_group_metadata_key("g")) == (2, "GroupMetadata", "g")


@pytest.mark.parametrize("type_id", sorted(RECORD_TYPES))
def test_every_type_gives_its_name_and_group(type_id: int) -> None:
    # Member and partition keys carry more fields after the group id.
    record_type = classify_key(_key(type_id, "g😀".encode(), b"\x00\x02m1"))
    assert record_type == (type_id, RECORD_TYPES[type_id], "g😀")


def test_unknown_and_damaged_keys_are_classified_not_refused() -> None:
    assert classify_key(_key(99, b"g")) == (99, "Unknown(99)", "g")
    assert record_type_name(9) == "Unknown(9)"  # retired in Kafka 4.1
    assert classify_key(INT16.pack(3)) == (3, "ConsumerGroupMetadata", None)
    assert classify_key(INT16.pack(3) + INT16.pack(50) + b"short") == (
        3,
        "ConsumerGroupMetadata",
        None,
    )
    assert classify_key(_key(5, b"\xff\xfe")).group_id is None
    with pytest.raises(RecordFormatError, match="no type id"):
        classify_key(b"\x00")


# Starting a JVM takes seconds: kept out of the fast unit-test run, still run in CI.
@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("java") is None or not (KAFKA_JARS / "kafka-group-coordinator-4.1.1.jar").exists(),
    reason="needs a JDK and Kafka's jars (resolved by the project's setup into .runtime/jars)",
)
def test_table_is_kafkas_coordinator_record_type(tmp_path: Path) -> None:
    source = tmp_path / "PrintTypes.java"
    source.write_text(_PRINT_TYPES, encoding="utf-8")
    result = subprocess.run(
        ["java", "-cp", f"{KAFKA_JARS}/*", str(source)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    kafka = {int(line.split()[0]): line.split()[1] for line in result.stdout.splitlines()}
    # Kafka's enum constants are the names in upper snake case.
    assert kafka == {
        type_id: re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()
        for type_id, name in RECORD_TYPES.items()
    }
