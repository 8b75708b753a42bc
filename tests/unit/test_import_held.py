"""Held sets (importing/held.py): packing gives back the very set, aliases still one object; key
codes are exact, whatever K; sets coded by two tables still find the keys they share."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from registry_db.importing import write as importer
from registry_db.importing.held import Held, KeyCodes
from registry_db.sources.profile_set import check_paths

DATA = Path(__file__).resolve().parents[1] / "data" / "valid"


def test_a_packed_set_unpacks_to_the_same_set_and_hash():
    sets, _ = check_paths([DATA])
    table = KeyCodes()
    for s in sets:
        held = Held.of(s, table)
        assert isinstance(held.body, bytes)
        back = held.set()
        assert back == s and back.content_hash() == s.content_hash() == held.content_hash
        assert [type(p) for p in back.profiles] == [type(p) for p in s.profiles]
        # Aliases (one provenance object cited by many profiles) stay one object.
        assert len({id(p.provenance) for p in back.profiles}) == len(
            {id(p.provenance) for p in s.profiles})
        assert (held.rates, held.counts) == (any(p.per_position_rates for p in s.profiles),
                                             any(p.counts is not None for p in s.profiles))


def test_key_codes_are_exact_for_any_k():
    table = KeyCodes()
    keys = [("m", "eagle3", 1, "on", "chat"), ("m", "eagle3", 2, "on", "chat"),
            ("m", "eagle3", 1, "off", "chat"), ("n", "eagle3", 1, "on", "chat"),
            ("m", "eagle3", 2**70, "on", "chat")]
    codes = [table.code(k) for k in keys]
    assert len(set(codes)) == len(keys) and [table.key(c) for c in codes] == keys
    assert table.known(("x", "eagle3", 1, "on", "chat")) is None
    assert table.known(keys[1]) == codes[1]
    sets, _ = check_paths([DATA / "counts.yaml"])
    big = dataclasses.replace(sets[0].profiles[0], num_spec_tokens=2**70)
    assert list(table.codes([big])) == [table.code(big.key)]  # too large for an array: a list


def test_sets_coded_by_two_tables_share_keys_as_one_table_would():
    sets, _ = check_paths([DATA / "per-position-rates.yaml"])
    one = sets[0]
    other = dataclasses.replace(one, name="other", file="other.yaml")
    mixed = importer.preview_sets([one, Held.of(other, KeyCodes())])
    plain = importer.preview_sets([one, other])
    assert [w.message for w in mixed.warnings] == [w.message for w in plain.warnings]
    assert any(w.code == "profile_key_overlap" for w in plain.warnings)
