"""A shard's string dictionaries (group ids, topic names) and its per-group table.

Offsets refer to groups and topics by code (index in a dictionary), so a key comparison is three
integer comparisons. Dictionaries only grow between compactions."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from state.coordinator.model import GroupMetadataValue
from state.engine.hashing import string_hash
from state.formats.records import decode_group_metadata_value, encode_group_metadata_value

#: Up to this many names, ``StringDict.lookup`` compares them one at a time.
_FEW_NAMES = 16


@dataclass(frozen=True)
class StringDict:
    """Strings by code, with a hash index: ``by_hash`` lists codes in (hash, code) order."""

    names: pa.Array  # large_string, no nulls
    hashes: np.ndarray  # uint64, string_hash of each name
    by_hash: np.ndarray  # int64

    @staticmethod
    def empty() -> StringDict:
        return StringDict(
            pa.array([], pa.large_string()), np.zeros(0, np.uint64), np.zeros(0, np.int64)
        )

    @staticmethod
    def build(names: pa.Array, hashes: np.ndarray) -> StringDict:
        """The dictionary of distinct ``names`` (large_string; code = position), ``hashes`` their
        ``string_hash``."""
        return StringDict(names, hashes, np.argsort(hashes, kind="stable").astype(np.int64))

    def __len__(self) -> int:
        return len(self.hashes)

    @cached_property
    def sorted_hashes(self) -> np.ndarray:
        """``hashes`` in ``by_hash`` order: gathered once per dictionary, which a kept state
        reuses for many calls, not once per lookup."""
        return self.hashes[self.by_hash]

    def lookup(self, names: pa.Array, hashes: np.ndarray) -> np.ndarray:
        """Code of each of ``names`` (``hashes``: their string_hash), -1 where absent."""
        result = np.full(len(names), -1, dtype=np.int64)
        if len(self) == 0 or len(names) == 0:
            return result
        lo = np.searchsorted(self.sorted_hashes, hashes, side="left")
        hi = np.searchsorted(self.sorted_hashes, hashes, side="right")
        count = hi - lo
        single = np.flatnonzero(count == 1)
        if 0 < single.size <= _FEW_NAMES:
            # The usual call's few names, compared one by one: cheaper than five Arrow kernels.
            wanted = names.to_numpy(zero_copy_only=False)
            for i, code in zip(single.tolist(), self.by_hash[lo[single]].tolist(), strict=True):
                if self.names[code].as_py() == wanted[i]:
                    result[i] = code
        elif single.size:
            codes = self.by_hash[lo[single]]
            same = pc.equal(
                names.take(pa.array(single)).cast(pa.large_string()),
                self.names.take(pa.array(codes)),
            )
            match = np.asarray(same.fill_null(False))
            result[single[match]] = codes[match]
        for i in np.flatnonzero(count > 1):  # hash collision: compare each candidate
            name = names[int(i)].as_py()
            for j in range(lo[i], hi[i]):
                code = int(self.by_hash[j])
                if self.names[code].as_py() == name:
                    result[i] = code
                    break
        return result

    def encode(self, names: pa.Array) -> tuple[StringDict, np.ndarray]:
        """Codes for ``names`` (no nulls), and the dictionary grown by the new ones."""
        if len(names) == 0:
            return self, np.zeros(0, np.int64)
        # Distinct names in order of first appearance, and each name's index among them.
        encoded = names.cast(pa.large_string()).dictionary_encode(null_encoding="encode")
        unique, position = encoded.dictionary, encoded.indices.to_numpy()
        hashes = string_hash(unique)
        codes = self.lookup(unique, hashes)
        missing = np.flatnonzero(codes < 0)
        grown = self
        if missing.size:
            new_codes = len(self) + np.arange(missing.size)
            codes[missing] = new_codes
            all_hashes = np.concatenate([self.hashes, hashes[missing]])
            all_names = pa.concat_arrays([self.names, unique.take(pa.array(missing))])
            # Insert the new codes into the hash order without re-sorting everything.
            order = np.argsort(hashes[missing], kind="stable")
            new_sorted = new_codes[order]
            at = np.searchsorted(self.sorted_hashes, hashes[missing][order], side="right")
            grown = StringDict(all_names, all_hashes, np.insert(self.by_hash, at, new_sorted))
        return grown, codes[position]

    def take(self, keep: np.ndarray) -> StringDict:
        """The codes ``keep`` (sorted), renumbered from 0."""
        return StringDict.build(self.names.take(pa.array(keep)), self.hashes[keep])


@dataclass(frozen=True)
class GroupTable:
    """Per-group state by code: offset count and GroupMetadata (record value bytes, with the numeric
    columns read from it)."""

    names: StringDict
    offset_count: np.ndarray  # int64
    has_metadata: np.ndarray  # bool
    metadata: pa.Array  # large_binary GroupMetadataValue record values, null without metadata
    generation: np.ndarray  # int32
    members: np.ndarray  # int32, member count
    state_ts: np.ndarray  # int64, current_state_timestamp_ms

    @staticmethod
    def empty() -> GroupTable:
        return GroupTable(
            StringDict.empty(),
            np.zeros(0, np.int64),
            np.zeros(0, bool),
            pa.array([], pa.large_binary()),
            np.zeros(0, np.int32),
            np.zeros(0, np.int32),
            np.zeros(0, np.int64),
        )

    def __len__(self) -> int:
        return len(self.offset_count)

    def exists(self) -> np.ndarray:
        return self.has_metadata | (self.offset_count > 0)

    def encode(self, names: pa.Array) -> tuple[GroupTable, np.ndarray]:
        """Codes for the group ids ``names``, adding new groups."""
        names_dict, codes = self.names.encode(names)
        grow = len(names_dict) - len(self)
        if grow == 0:
            return self, codes
        return (
            GroupTable(
                names_dict,
                np.concatenate([self.offset_count, np.zeros(grow, np.int64)]),
                np.concatenate([self.has_metadata, np.zeros(grow, bool)]),
                pa.concat_arrays([self.metadata, pa.nulls(grow, pa.large_binary())]),
                np.concatenate([self.generation, np.zeros(grow, np.int32)]),
                np.concatenate([self.members, np.zeros(grow, np.int32)]),
                np.concatenate([self.state_ts, np.zeros(grow, np.int64)]),
            ),
            codes,
        )

    def group_metadata(self, code: int) -> GroupMetadataValue | None:
        if not self.has_metadata[code]:
            return None
        return decode_group_metadata_value(self.metadata[code].as_py())

    def with_metadata(
        self, codes: list[int], values: list[GroupMetadataValue | None]
    ) -> GroupTable:
        """Set (None: clear) the GroupMetadata of distinct groups ``codes``."""
        if not codes:
            return self
        idx = np.array(codes, dtype=np.int64)
        has = self.has_metadata.copy()
        generation = self.generation.copy()
        members = self.members.copy()
        state_ts = self.state_ts.copy()
        raw: list[bytes | None] = []
        for i, value in zip(codes, values, strict=True):
            has[i] = value is not None
            generation[i] = value.generation if value is not None else 0
            members[i] = len(value.members) if value is not None else 0
            state_ts[i] = value.current_state_timestamp_ms if value is not None else 0
            raw.append(None if value is None else encode_group_metadata_value(value))
        source = np.arange(len(self), dtype=np.int64)
        source[idx] = len(self) + np.arange(len(idx))
        metadata = pa.concat_arrays([self.metadata, pa.array(raw, pa.large_binary())]).take(
            pa.array(source)
        )
        return replace(
            self,
            has_metadata=has,
            metadata=metadata,
            generation=generation,
            members=members,
            state_ts=state_ts,
        )

    def with_counts(self, codes: np.ndarray, change: np.ndarray) -> GroupTable:
        """``change[i]`` added to the offset count of group ``codes[i]`` (codes may repeat)."""
        counts = self.offset_count.copy()
        np.add.at(counts, codes, change)
        return replace(self, offset_count=counts)

    def take(self, keep: np.ndarray) -> GroupTable:
        """The groups ``keep`` (sorted codes), renumbered from 0."""
        return GroupTable(
            self.names.take(keep),
            self.offset_count[keep],
            self.has_metadata[keep],
            self.metadata.take(pa.array(keep)),
            self.generation[keep],
            self.members[keep],
            self.state_ts[keep],
        )
