"""The fast OffsetCommit reader vouches only for what the exact decoder reads the same way.

Whenever ``decode_commit_columns`` returns columns, they are those of ``decode_request``'s
request; it returns ``None`` (the exact decoder's turn) for anything else, and never for a plain
valid commit.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state.coordinator.requests import DecodeError, OffsetCommitRequest
from state.formats.request_codec import decode_request, encode_request
from state.formats.request_fast import CommitColumns, commit_columns, decode_commit_columns
from tests.state.formats.request_documents import (
    Obj,
    commit_objects,
    dumps,
    message_values,
)
from tests.state.formats.request_examples import (
    COMMIT,
    CORRUPT,
    INVALID,
    TXN_COMMIT,
    UNSUPPORTED,
)
from tests.state.strategies import commits


def exact_columns(data: bytes) -> CommitColumns | None:
    """The columns of the exact decoder's request, if it is an OffsetCommit with partitions."""
    request = decode_request(data)
    if isinstance(request, OffsetCommitRequest) and request.partitions:
        return commit_columns(request)
    return None


# --- properties ---------------------------------------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(message_values().filter(bool))
def test_vouches_only_for_what_the_exact_decoder_reads_alike(data: bytes) -> None:
    fast = decode_commit_columns(data)
    if fast is not None:
        assert fast == exact_columns(data)


def _strings(value: Any) -> list[str]:
    if isinstance(value, Obj):
        return [s for _, v in value for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


@settings(max_examples=300, deadline=None)
@given(commit_objects(), st.booleans(), st.booleans())
def test_vouches_for_every_valid_commit(doc: Obj, ascii_only: bool, pretty: bool) -> None:
    data = dumps(doc, ascii_only, pretty).encode()
    exact = exact_columns(data)
    fast = decode_commit_columns(data)
    # The one valid commit it leaves to the exact decoder: a colon in a string value (the key
    # check cannot tell it from a key) in a document with escapes; and a commit without partitions.
    if b"\\" in data and any(":" in s for s in _strings(doc)):
        assert fast in (None, exact)
    else:
        assert fast == exact


@given(commits())
def test_vouches_for_the_encoders_commits(request_: OffsetCommitRequest) -> None:
    data = encode_request(request_)
    assert decode_commit_columns(data) == (
        commit_columns(request_) if request_.partitions else None
    )


# --- examples -----------------------------------------------------------------------------------

P0 = '{"partitionIndex":0,"committedOffset":5}'


def commit(partitions: str = P0, top: str = "", topic: str = "") -> bytes:
    """A minimal commit document with ``top`` fields and ``topic`` fields added, as raw text so
    that keys can repeat."""
    return (
        '{"version":1,"api":"OffsetCommit","requestId":"r","groupId":"g"'
        f'{top},"topics":[{{"name":"t"{topic},"partitions":[{partitions}]}}]}}'
    ).encode()


def columns(**fields: Any) -> CommitColumns:
    """The columns of ``commit()`` with one partition: defaults, overridden by ``fields``."""
    values: dict[str, Any] = {
        "request_id": "r",
        "group_id": "g",
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "retention_time_ms": -1,
        "timeout_ms": None,
        "topics": ["t"],
        "partitions": [0],
        "offsets": [5],
        "leader_epochs": [-1],
        "metadata": [""],
    }
    return CommitColumns(**(values | fields))


def part(fields: str = "", index: str = "0", offset: str = "5") -> str:
    """A partition object's text: index and offset, then ``fields``."""
    return f'{{"partitionIndex":{index},"committedOffset":{offset}{fields}}}'


META = ',"committedMetadata":'
WHITESPACE = (
    b' {\n "version" : 1 ,\t"api":"OffsetCommit","requestId":"r","groupId":"g",\r\n'
    b'"topics":[ {"name":"t","partitions":[ {"partitionIndex":0,"committedOffset":5} ] } ] }\n'
)
EVERY_FIELD = commit(
    part(',"committedLeaderEpoch":2147483647,"committedMetadata":"m"', "7", str(-(2**63))),
    ',"timeoutMs":0,"generationId":-2147483648,"memberId":"m1",'
    '"groupInstanceId":"i","retentionTimeMs":9223372036854775807',
)

VOUCHED: list[tuple[str, bytes, CommitColumns]] = [
    ("defaults", commit(), columns()),
    (
        "every field",
        EVERY_FIELD,
        columns(
            partitions=[7],
            offsets=[-(2**63)],
            leader_epochs=[2**31 - 1],
            metadata=["m"],
            timeout_ms=0,
            generation_id=-(2**31),
            member_id="m1",
            group_instance_id="i",
            retention_time_ms=2**63 - 1,
        ),
    ),
    ("null metadata is empty", commit(part(META + "null")), columns()),
    ("null nullables", commit(top=',"timeoutMs":null,"groupInstanceId":null'), columns()),
    ("-0", commit(part(index="-0")), columns()),
    ("colon in metadata", commit(part(META + '"h:1"')), columns(metadata=["h:1"])),
    (
        "colons in ids",
        commit(top=',"memberId":"a:b:c"').replace(b'"r"', b'":r:"'),
        columns(request_id=":r:", member_id="a:b:c"),
    ),
    ("escapes, no colon", commit(part(META + r'"a\n\"b\\"')), columns(metadata=['a\n"b\\'])),
    ("escaped pair", commit(part(META + r'"\ud83d\ude00"')), columns(metadata=["😀"])),
    ("escaped key", commit(part().replace("partitionIndex", r"\u0070artitionIndex")), columns()),
    ("whitespace", WHITESPACE, columns()),
    (
        "empty topic beside",
        commit().replace(b'"topics":[', b'"topics":[{"name":"e","partitions":[]},'),
        columns(),
    ),
    ("huge metadata", commit(part(META + f'"{"é" * 100_000}"')), columns(metadata=["é" * 100_000])),
]


@pytest.mark.parametrize(("data", "want"), [pytest.param(*c[1:], id=c[0]) for c in VOUCHED])
def test_vouched(data: bytes, want: CommitColumns) -> None:
    assert decode_commit_columns(data) == want
    assert exact_columns(data) == want


#: (case, message, what the exact decoder answers: an error code, or "valid" for a request that
#: only the exact decoder reads).
LEFT_TO_EXACT: list[tuple[str, bytes, object]] = [
    ("duplicate top-level key", commit(top=',"groupId":"h"'), INVALID),
    ("duplicate topic key", commit(topic=',"name":"u"'), INVALID),
    ("duplicate partition key", commit(part(',"committedOffset":6')), INVALID),
    ("duplicate, same value", commit(part(',"partitionIndex":0')), INVALID),
    ("duplicate optional key", commit(part(META + '""' + META + '""')), INVALID),
    ("duplicate, escaped", commit(part(r',"\u0070artitionIndex":1')), INVALID),
    ("duplicate in unknown value", commit(part(',"x":{"a":1,"a":2}')), "valid"),
    ("unknown top-level field", commit(top=',"future":1'), "valid"),
    ("unknown partition field", commit(part(',"x":null')), "valid"),
    ("colon in value, escapes", commit(part(META + r'"h:1\n"')), "valid"),
    ("boolean index", commit(part(index="true")), INVALID),
    ("float offset", commit(part(offset="5.0")), INVALID),
    ("exponent offset", commit(part(offset="5e0")), INVALID),
    ("index 2^31", commit(part(index=str(2**31))), INVALID),
    ("offset 2^63", commit(part(offset=str(2**63))), INVALID),
    ("offset -2^63-1", commit(part(offset=str(-(2**63) - 1))), INVALID),
    ("offset 30 digits", commit(part(offset=str(10**30))), INVALID),
    ("epoch null", commit(part(',"committedLeaderEpoch":null')), INVALID),
    ("metadata number", commit(part(META + "1")), INVALID),
    ("member null", commit(top=',"memberId":null'), INVALID),
    ("timeout negative", commit(top=',"timeoutMs":-1'), INVALID),
    ("timeout 2^31", commit(top=',"timeoutMs":2147483648'), INVALID),
    ("version true", commit().replace(b'"version":1', b'"version":true'), INVALID),
    ("version 2", commit().replace(b'"version":1', b'"version":2'), UNSUPPORTED),
    ("other api", commit().replace(b"OffsetCommit", b"OffsetDelete"), "valid"),
    ("transactional", encode_request(TXN_COMMIT), "valid"),
    ("transactional, no producer", commit().replace(b"OffsetCommit", b"TxnOffsetCommit"), INVALID),
    ("partition not object", commit("[0,5]"), INVALID),
    ("no topics", commit().replace(b'{"name":"t","partitions":[%s]}' % P0.encode(), b""), "valid"),
    ("no partitions", commit(""), "valid"),
    ("lone surrogate escaped", commit(part(META + r'"\ud800"')), INVALID),
    ("lone surrogate raw", commit(part(META + '"X"')).replace(b"X", b"\xed\xb0\x80"), CORRUPT),
    ("bad UTF-8 in unknown field", commit(top=',"x":"X"').replace(b"X", b"\xff"), CORRUPT),
    ("NaN in unknown field", commit(top=',"x":NaN'), CORRUPT),
    ("control character", commit(part(META + '"\x01"')), CORRUPT),
    ("BOM", b"\xef\xbb\xbf" + commit(), CORRUPT),
    ("trailing data", commit() + b" {}", CORRUPT),
    ("array", b"[" + commit() + b"]", CORRUPT),
]


@pytest.mark.parametrize(("data", "exact"), [pytest.param(*c[1:], id=c[0]) for c in LEFT_TO_EXACT])
def test_left_to_the_exact_decoder(data: bytes, exact: object) -> None:
    assert decode_commit_columns(data) is None
    decoded = decode_request(data)
    if exact == "valid":
        assert not isinstance(decoded, DecodeError)
    else:
        assert isinstance(decoded, DecodeError) and decoded.error_code == exact


def test_accepts_bytearray() -> None:
    data = encode_request(COMMIT)
    assert decode_commit_columns(bytearray(data)) == commit_columns(COMMIT)
