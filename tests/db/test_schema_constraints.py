"""The database itself holds the spec's rules that SQL can hold, on both backends.

Each test inserts one valid row set and then one row that breaks exactly one rule, and expects
the database (not the validator) to refuse it.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import insert, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.schema import CreateTable

from registry_db import store
from registry_db.store.schema import (
    metadata,
    profile_counts,
    profile_rates,
    profile_sets,
    profiles,
    provenances,
)

PROFILE = dict(set_id=1, position=0, model="m", speculative_method="mtp", num_spec_tokens=3,
               thinking="on", category="coding", acceptance_length=2.5, method="assumed",
               rationale="because")


@pytest.fixture
def base(engine):
    """A database with one set (id 1), one provenance (id 1) and one profile (id 1)."""
    with engine.begin() as conn:
        conn.execute(insert(profile_sets).values(
            id=1, name="s", content_hash="x" * 64, imported_at=datetime.now(UTC)))
        conn.execute(insert(provenances).values(id=1, content_hash="p" * 64, source="src"))
        conn.execute(insert(profiles).values(id=1, **PROFILE))
    return engine


def _refused(engine, table, **values) -> None:
    with pytest.raises(IntegrityError):
        with store.write_connection(engine) as conn:
            conn.execute(insert(table).values(**values))


def test_valid_rows_are_accepted(base):
    with store.write_connection(base) as conn:
        conn.execute(insert(profiles).values(**{**PROFILE, "id": 2, "category": "chat"}))
        conn.execute(insert(profile_rates).values(profile_id=2, position=1, rate=1.0))
    with base.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM profiles")).scalar() == 2


def test_duplicate_profile_key(base):
    _refused(base, profiles, **{**PROFILE, "id": 2, "position": 1})


@pytest.mark.parametrize("change", [
    {"thinking": "maybe"},
    {"num_spec_tokens": 0, "acceptance_length": 1.0},
    {"acceptance_length": 5.0},  # K + 2 with K = 3
    {"acceptance_length": 0.5},
    {"acceptance_length": None},
    {"acceptance_length": float("nan")},  # SQLite stores NaN as NULL; PostgreSQL sorts it last
    {"acceptance_length": float("inf")},
    {"model": None},
    {"model": ""},
    {"method": "not_charged"},
    {"method": "no_such_method"},
    {"method": "measured", "provenance_id": None},
    {"method": "copied", "provenance_id": 1, "copied_from": None},
    {"method": "literature", "provenance_id": 1, "rationale": None},
    {"set_id": 99},  # an orphan profile
    {"provenance_id": 99},
], ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_profile_rules(base, change):
    _refused(base, profiles, **{**PROFILE, "id": 2, "category": "other", **change})


@pytest.mark.parametrize("rate", [1.5, -0.1, float("nan")])
def test_rate_range(base, rate):
    _refused(base, profile_rates, profile_id=1, position=1, rate=rate)


def test_orphan_rate(base):
    _refused(base, profile_rates, profile_id=42, position=1, rate=0.5)


COUNTS = dict(profile_id=1, drafts=4, draft_tokens=12, accepted_tokens=6,
              accepted_per_position="[3,2,1]", al_stderr=0.5)


def test_valid_counts_are_accepted_with_64_bit_values(base):
    with store.write_connection(base) as conn:
        conn.execute(insert(profile_counts).values(**{**COUNTS, "drafts": 2**53,
                                                      "draft_tokens": 2**53}))
    with base.connect() as conn:
        assert conn.execute(text("SELECT drafts FROM profile_counts")).scalar() == 2**53


@pytest.mark.parametrize("change", [
    {"drafts": 0},
    {"accepted_tokens": -1, "draft_tokens": -1},
    {"accepted_tokens": 13},  # more than draft_tokens
    {"al_stderr": -0.1},
    {"al_stderr": None},
    {"drafts": None},
    {"profile_id": 42},  # counts of no profile
], ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_counts_rules(base, change):
    _refused(base, profile_counts, **{**COUNTS, **change})


def test_counts_go_with_their_profile(base):
    with store.write_connection(base) as conn:
        conn.execute(insert(profile_counts).values(**COUNTS))
        conn.execute(text("DELETE FROM profile_sets WHERE id = 1"))
    with base.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM profile_counts")).scalar() == 0


@pytest.mark.parametrize("change", [
    {"temperature": -1.0},
    {"temperature": 1.0, "top_p": 0.0},
    {"temperature": 1.0, "top_p": 1.5},
    {"temperature": 1.0, "top_k": -2},
    {"temperature": 1.0, "max_tokens": -1},
    {"top_p": 0.9},  # sampling without a temperature
    {"prompts": -1},
    {"tp": -1},
    {"source": None},
    {"source": ""},
], ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_provenance_rules(base, change):
    _refused(base, provenances, **{"id": 2, "content_hash": "q" * 64, "source": "src", **change})


def test_provenance_deduplicated_by_content(base):
    _refused(base, provenances, id=3, content_hash="p" * 64, source="other")


def test_deleting_a_set_cascades(base):
    with store.write_connection(base) as conn:
        conn.execute(insert(profile_rates).values(profile_id=1, position=1, rate=1.0))
        conn.execute(text("DELETE FROM profile_sets WHERE id = 1"))
    with base.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM profiles")).scalar() == 0
        assert conn.execute(text("SELECT COUNT(*) FROM profile_rates")).scalar() == 0


def test_provenance_in_use_cannot_be_deleted(base):
    with store.write_connection(base) as conn:
        conn.execute(text("UPDATE profiles SET provenance_id = 1 WHERE id = 1"))
    with pytest.raises(IntegrityError):
        with store.write_connection(base) as conn:
            conn.execute(text("DELETE FROM provenances WHERE id = 1"))


def _constraint_names(dialect) -> list[str]:
    names = []
    for table in metadata.sorted_tables:
        ddl = str(CreateTable(table).compile(dialect=dialect))
        names += [line.split()[1] for line in ddl.splitlines() if "CONSTRAINT" in line]
        names += [ix.name for ix in table.indexes]
    return names


def test_constraint_names_short_and_equal_on_both_dialects():
    pg, lite = _constraint_names(postgresql.dialect()), _constraint_names(sqlite.dialect())
    assert pg == lite
    assert "uq_profiles_key" in pg
    assert all(len(n) <= 63 for n in pg), [n for n in pg if len(n) > 63]
    assert len(set(pg)) == len(pg)


def test_reflected_constraint_names(engine):
    """The names the database reports are the model's names, on the backend under test."""
    from sqlalchemy import inspect

    with engine.connect() as conn:
        insp = inspect(conn)
        uniques = {u["name"] for u in insp.get_unique_constraints("profiles")}
        checks = {c["name"] for c in insp.get_check_constraints("profiles")}
        fks = {f["name"] for f in insp.get_foreign_keys("profiles")}
    assert "uq_profiles_key" in uniques
    assert {"ck_profiles_thinking", "ck_profiles_k", "ck_profiles_al_range"} <= checks
    assert {"fk_profiles_set_id", "fk_profiles_provenance_id", "fk_profiles_method"} <= fks
