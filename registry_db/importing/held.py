"""Sets held between validation and writing, a few dozen bytes a profile.

An import validates every file before it writes any (nothing is written when one is invalid), so
what it read must be kept until then. A :class:`Held` set keeps what the writer decides with
(name, file, content hash, profile count, whether it has rates or counts, its profile keys as
:class:`KeyCodes` integers) and the set itself pickled and compressed: the writer unpacks one set
at a time, so an import's peak memory is bounded by its largest file and these summaries, not by
the folder (1M profiles: 964 MiB peak when every set was kept as objects; docs/decisions.md,
"Importing"). Re-reading the files instead would parse every file twice.
"""

from __future__ import annotations

import dataclasses
import operator
import pickle
import sys
import zlib
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from registry_db.model import Keyed, Profile, ProfileSet

__all__ = ["Held", "KeyCodes"]

#: zlib's fastest level: 23 bytes a profile against 100 packed, at a third of packing's time.
_LEVEL = 1

#: Key codes are ``K << _COMBO_BITS | combo``: exact for any K >= 0 and 2**32 combinations.
_COMBO_BITS = 32


class KeyCodes:
    """Profile keys as integers: each (model, method, thinking, category) gets a number the first
    time it is seen, and a key is ``K << 32 | that number`` (one int, exact, no collision), so a
    million keys cost a dictionary of ints rather than of five-field tuples."""

    def __init__(self) -> None:
        self._combos: dict[tuple[str, str, str, str], int] = {}
        self._names: list[tuple[str, str, str, str]] = []

    def code(self, key: tuple) -> int:
        """The code of ``key`` (``(model, method, K, thinking, category)``), numbering its
        combination if it is new."""
        model, method, k, thinking, category = key
        combo = (model, method, thinking, category)
        n = self._combos.get(combo)
        if n is None:
            n = self._combos[combo] = len(self._names)
            self._names.append(combo)
        return int(k) << _COMBO_BITS | n

    def known(self, key: tuple) -> int | None:
        """The code of ``key`` when its combination has been seen, else None (no set given to
        this table holds it)."""
        model, method, k, thinking, category = key
        n = self._combos.get((model, method, thinking, category))
        return None if n is None else int(k) << _COMBO_BITS | n

    def models(self) -> list[str]:
        """The models of every combination seen, sorted."""
        return sorted({combo[0] for combo in self._names})

    def key(self, code: int) -> tuple:
        """The key ``code`` stands for."""
        model, method, thinking, category = self._names[code & ((1 << _COMBO_BITS) - 1)]
        return (model, method, code >> _COMBO_BITS, thinking, category)

    def codes(self, profiles: Iterable[Keyed]) -> Sequence[int]:
        """The keys of ``profiles`` as codes: an array of 8 bytes a key (a list, exact still,
        should a K not fit in 64 bits: a set given through the library need not have been read
        from a file)."""
        combos, names = self._combos, self._names
        values = []
        for p in profiles:  # code() inlined: once for every profile read
            combo = (p.model, p.speculative_method, p.thinking, p.category)
            n = combos.get(combo)
            if n is None:
                n = combos[combo] = len(names)
                names.append(combo)
            values.append(int(p.num_spec_tokens) << _COMBO_BITS | n)
        try:
            return array("q", values)
        except OverflowError:
            return values


@dataclass(frozen=True, eq=False)
class Held:
    """A valid set as the writer needs it: its summary, its key codes and the set, compressed
    (or, for a set a library caller holds anyway, the set itself)."""

    name: str
    file: str | None
    content_hash: str
    profiles: int
    #: Whether any profile has per-position rates / counts.
    rates: bool
    counts: bool
    #: The profile keys' codes in :attr:`table`, in file order.
    keys: Sequence[int]
    table: KeyCodes
    body: bytes | ProfileSet

    @classmethod
    def of(cls, s: ProfileSet, table: KeyCodes, *, pack: bool = True) -> Held:
        """``s`` held: packed (:func:`_pack`) when ``pack``."""
        profiles = s.profiles
        body: bytes | ProfileSet = _pack(s) if pack else s
        return cls(s.name, s.file, s.content_hash(), len(profiles),
                   any(p.per_position_rates for p in profiles),
                   any(p.counts is not None for p in profiles),
                   table.codes(profiles), table, body)

    def set(self) -> ProfileSet:
        """The set itself (a new copy each time when packed)."""
        body = self.body
        if isinstance(body, ProfileSet):
            return body
        name, caveats, file, rows = pickle.loads(zlib.decompress(body))
        new, fields = object.__new__, _FIELDS
        profiles = []
        for row in rows:  # as pickle rebuilds an object: no __init__, its attributes set
            p = new(Profile)
            p.__dict__.update(zip(fields, row))
            profiles.append(p)
        return ProfileSet(name, caveats, tuple(profiles), file)


#: A profile's fields, in the order :func:`_pack` writes their values.
_FIELDS = tuple(f.name for f in dataclasses.fields(Profile))
_values = operator.attrgetter(*_FIELDS)
#: The text fields most profiles share (model, method, thinking, category, how measured).
_SHARED = tuple(_FIELDS.index(n) for n in ("model", "speculative_method", "thinking",
                                           "category", "method"))


def _pack(s: ProfileSet) -> bytes:
    """``s`` pickled and compressed, each profile as the tuple of its fields' values and equal
    texts as one string (pickle writes a repeated object once): 0.6x the bytes and half the
    time of pickling the objects, unpacked in 0.6x the time."""
    rows = []
    for p in s.profiles:
        row = list(_values(p))
        for i in _SHARED:
            if type(row[i]) is str:
                row[i] = sys.intern(row[i])
        rows.append(tuple(row))
    return zlib.compress(pickle.dumps((s.name, s.caveats, s.file, rows),
                                      pickle.HIGHEST_PROTOCOL), _LEVEL)
