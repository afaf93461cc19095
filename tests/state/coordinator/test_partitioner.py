"""Kafka's group → offsets-partition mapping: Java ``String.hashCode`` and ``Utils.abs``."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from state.coordinator.partitioner import DEFAULT_PARTITIONS, java_string_hash, partition_for

INT32_MIN = -(1 << 31)


def reference_hash(s: str) -> int:
    """Java's definition written out literally: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 units,
    reduced to a signed int32. Deliberately a different formulation from the module's loop."""
    units = [
        int.from_bytes(s.encode("utf-16-be", "surrogatepass")[i : i + 2], "big")
        for i in range(0, len(s.encode("utf-16-be", "surrogatepass")), 2)
    ]
    n = len(units)
    total = sum(u * pow(31, n - 1 - i, 1 << 32) for i, u in enumerate(units)) % (1 << 32)
    return total - (1 << 32) if total >= 1 << 31 else total


# Values known from Java (``"hello".hashCode() == 99162322`` is the classic example; the others
# are derived by hand below and cross-checked against a JVM when one is available).
@pytest.mark.parametrize(
    ("s", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("ab", 97 * 31 + 98),  # 3105
        ("hello", 99162322),
        # U+00E9 is one BMP code unit (0xE9 = 233), not its two UTF-8 bytes.
        ("é", 233),
        ("日本", 0x65E5 * 31 + 0x672C),  # 26085*31 + 26412 = 835047
        # U+1F600 is the surrogate pair D83D DE00: 55357*31 + 56832.
        ("😀", 55357 * 31 + 56832),  # 1772899
        # The hash of "polygenelubricants" overflows to exactly Integer.MIN_VALUE.
        ("polygenelubricants", INT32_MIN),
    ],
)
def test_java_string_hash_known_values(s: str, expected: int) -> None:
    assert java_string_hash(s) == expected
    assert reference_hash(s) == expected


def test_hash_overflow_wraps_to_negative_int32() -> None:
    # 31^7 * 'z' alone already exceeds 2^31: the loop must wrap like Java int arithmetic.
    h = java_string_hash("zzzzzzzzzz")
    assert h == reference_hash("zzzzzzzzzz")
    assert -(1 << 31) <= h < (1 << 31)
    assert h < 0


def test_surrogate_pair_is_two_code_units_not_one_code_point() -> None:
    # Hashing the code point 0x1F600 as one unit would give 128512.
    assert java_string_hash("😀") != 0x1F600
    assert java_string_hash("x😀y") == reference_hash("x😀y")


def test_lone_surrogate_hashes_as_its_code_unit() -> None:
    assert java_string_hash("\ud800") == 0xD800


def test_random_strings_match_reference() -> None:
    rng = random.Random(1234)
    alphabet = "abcXYZ09-_.é日😀\U0010ffff"
    for _ in range(500):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert java_string_hash(s) == reference_hash(s), s


@pytest.mark.parametrize(
    ("group", "expected"),
    [
        ("hello", 99162322 % 50),  # 22
        ("", 0),
        # Utils.abs(Integer.MIN_VALUE) == 0, so partition 0 (Math.abs would stay negative).
        ("polygenelubricants", 0),
    ],
)
def test_partition_for_known_values(group: str, expected: int) -> None:
    assert partition_for(group) == expected


def test_partition_for_negative_hash_uses_abs_not_mask() -> None:
    group = "groupé😀x"
    h = java_string_hash(group)
    assert h < 0
    assert partition_for(group) == (-h) % DEFAULT_PARTITIONS
    # The common mistake gives a different partition for this group.
    assert partition_for(group) != (h & 0x7FFFFFFF) % DEFAULT_PARTITIONS


def test_min_value_hash_maps_to_partition_zero_for_any_count() -> None:
    # Python's abs(-2**31) % n is not 0 for most n (2**31 % 50 == 48); Utils.abs makes it 0.
    assert abs(INT32_MIN) % 50 == 48
    for n in (1, 3, 7, 50, 100):
        assert partition_for("polygenelubricants", n) == 0


def test_partition_for_other_partition_counts() -> None:
    for n in (1, 2, 7, 50, 1000):
        for group in ("hello", "group-1", "é", "😀", "x😀y"):
            h = java_string_hash(group)
            expected = 0 if h == INT32_MIN else abs(h) % n
            assert partition_for(group, n) == expected
            assert 0 <= partition_for(group, n) < n


@pytest.mark.parametrize("n", [0, -1])
def test_partition_for_rejects_non_positive_partition_count(n: int) -> None:
    with pytest.raises(ValueError, match="partitions"):
        partition_for("g", n)


JAVA_HASHER = """
import java.nio.file.*;
import java.util.*;

public class Hasher {
    public static void main(String[] args) throws Exception {
        StringBuilder out = new StringBuilder();
        for (String line : Files.readAllLines(Paths.get(args[0]))) {
            StringBuilder s = new StringBuilder();
            for (String unit : line.trim().split(" ")) {
                if (!unit.isEmpty()) s.append((char) Integer.parseInt(unit, 16));
            }
            out.append(s.toString().hashCode()).append('\\n');
        }
        System.out.print(out);
    }
}
"""


# Starting a JVM takes seconds: kept out of the fast unit-test run, still run in CI.
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("javac") is None or shutil.which("java") is None, reason="no JDK")
def test_matches_java_string_hashcode(tmp_path: Path) -> None:
    """Cross-check against a real JVM; strings travel as hex UTF-16 code units so no charset
    conversion can interfere."""
    rng = random.Random(42)
    alphabet = "abcdefghijklmnopqrstuvwxyzABC0123456789-_.:é日😀\U0010ffff\u0000"
    strings = ["", "hello", "polygenelubricants", "\ud800"]
    strings += [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(300)
    ]
    lines = []
    for s in strings:
        raw = s.encode("utf-16-be", "surrogatepass")
        lines.append(
            " ".join(f"{int.from_bytes(raw[i : i + 2], 'big'):x}" for i in range(0, len(raw), 2))
        )
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="ascii")
    (tmp_path / "Hasher.java").write_text(JAVA_HASHER, encoding="ascii")
    subprocess.run(["javac", "Hasher.java"], cwd=tmp_path, check=True, timeout=60)
    result = subprocess.run(
        ["java", "-cp", str(tmp_path), "Hasher", str(tmp_path / "in.txt")],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    java_hashes = [int(x) for x in result.stdout.split()]
    assert java_hashes == [java_string_hash(s) for s in strings]
