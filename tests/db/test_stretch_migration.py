"""Migration 0010 on both backends: every profile version gains its key's stretch
(``key_id``), the as-of lookup finds versions by stretch and first revision instead of the key
index, and every as-of answer is the one 0009's statement gave, for each key of a history with
edits, a removal, a deletion and a re-addition, at, between, before and after every import; the
downgrade gives back the rows and the answers exactly."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import text

from registry_db import store
from registry_db.resolve.lookup import bound
from registry_db.resolve.statements import named_one_statement
from tests.helpers import HISTORY_0006 as HISTORY
from tests.helpers import HISTORY_TIMES as T
from tests.helpers import broken_foreign_keys, migrated_to
from tests.helpers import fill_history_0006 as _fill

#: The one-run as-of statement as 0009's code ran it (copied, not imported: today's reads the
#: stretches), over every set or ``:set_1`` alone.
STATEMENT_0009 = """WITH c AS (
    SELECT p.id, p.category, p.acceptance_length, p.method, p.copied_from, p.provenance_id,
           p.set_name, (SELECT n.revision FROM revisions n WHERE n.set_name = p.set_name
           AND n.imported_at <= :as_of ORDER BY n.imported_at DESC LIMIT 1) AS revision
    FROM profile_versions p
    WHERE p.model = :model AND p.speculative_method = :method AND p.num_spec_tokens = :k
      AND p.thinking = :thinking AND p.category IN (:category, :fallback){scope}
      AND p.valid_from <= :as_of AND (p.valid_until IS NULL OR p.valid_until > :as_of)
)
SELECT 0 AS lookup_id, c.category,
       (SELECT COUNT(*) FROM c AS h WHERE h.category = c.category) AS set_count,
       c.id, c.set_name, c.acceptance_length, c.method, c.copied_from, pr.source, pr.hardware,
       r.position, r.rate, c.revision, cn.drafts, cn.draft_tokens, cn.accepted_tokens,
       cn.accepted_per_position, cn.al_stderr
FROM c
LEFT JOIN provenances pr ON pr.id = c.provenance_id
LEFT JOIN version_rates r ON r.profile_id = c.id
LEFT JOIN version_counts cn ON cn.profile_id = c.id
WHERE c.category = :category OR NOT EXISTS (SELECT 1 FROM c AS h WHERE h.category = :category)"""

#: Every key the history ever held, with a category no set holds (the fallback's case).
KEYS = sorted({p[:4] for revisions in HISTORY.values() for _, _, _, ps in revisions for p in ps})
CATEGORIES = ("coding", "chat", "math", "law")


def _times() -> list:
    """Before the first import, at each import, a microsecond before and after, and later."""
    out = [T[0] - timedelta(days=30), T[-1] + timedelta(days=30)]
    for at in T:
        out += [at - timedelta(microseconds=1), at, at + timedelta(microseconds=1)]
    return sorted(out)


def _answers(engine, statement_of) -> dict[tuple, list[tuple]]:
    """Each run's rows, for every key × category × fallback × scope × time."""
    out = {}
    with engine.connect() as conn:
        for model, method, k, thinking in KEYS:
            for category in CATEGORIES:
                for fallback in ("", "coding"):
                    for scope in (None, "golden", "vendor"):
                        sql = text(statement_of(scope is not None))
                        for at in _times():
                            params = {"model": model, "method": method, "k": k,
                                      "thinking": thinking, "category": category,
                                      "fallback": fallback,
                                      "as_of": bound(at, conn.dialect.name)}
                            if scope is not None:
                                params["set_1"] = scope
                            rows = conn.execute(sql, params).all()
                            out[(model, category, fallback, scope, at)] = sorted(
                                tuple(r) for r in rows)
    return out


def _old(scoped: bool) -> str:
    return STATEMENT_0009.format(scope=" AND p.set_name IN (:set_1)" if scoped else "")


def _versions(engine) -> list[tuple]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(
            "SELECT id, set_name, first_revision, last_revision, valid_from, valid_until, "
            "position, model, speculative_method, num_spec_tokens, thinking, category, "
            "acceptance_length, method, provenance_id, rationale, copied_from "
            "FROM profile_versions ORDER BY id"))]


def test_versions_find_their_stretch_and_every_as_of_answer_is_kept(empty_url):
    with migrated_to(empty_url, "0006") as engine:
        _fill(engine)
        store.upgrade(engine, "0009")
        rows = _versions(engine)
        before = _answers(engine, _old)
        # The grid answers something: versions, conflicts' counts and refusals alike.
        assert sum(bool(v) for v in before.values()) > len(before) // 4
        assert any(not v for v in before.values())

        store.upgrade(engine, "0010")
        assert not broken_foreign_keys(engine)
        with engine.connect() as conn:
            # Each version's stretch is its set's and key's and holds the version's start.
            wrong = conn.execute(text(
                "SELECT COUNT(*) FROM profile_versions v JOIN profile_keys k ON k.id = v.key_id "
                "WHERE k.set_name <> v.set_name OR k.model <> v.model OR k.category <> "
                "v.category OR k.num_spec_tokens <> v.num_spec_tokens OR k.valid_from > "
                "v.valid_from OR (k.valid_until IS NOT NULL AND k.valid_until <= v.valid_from)"
            )).scalar()
            stretches = conn.execute(text(
                "SELECT COUNT(DISTINCT key_id), COUNT(key_id), COUNT(*) FROM profile_versions"
            )).one()
        assert wrong == 0
        # Seven versions in five stretches: golden's coding holds three (2.5, 2.6, 2.5 again).
        assert tuple(stretches) == (5, 7, 7)
        assert _versions(engine) == rows
        dialect = engine.dialect.name
        assert _answers(engine, lambda scoped: named_one_statement(
            dialect, int(scoped), as_of=True)) == before

        store.downgrade(engine, "0009")
        assert not broken_foreign_keys(engine)
        assert _versions(engine) == rows
        assert _answers(engine, _old) == before


def test_an_empty_registry_upgrades_and_downgrades(empty_url):
    with migrated_to(empty_url, "0009") as engine:
        store.upgrade(engine, "0010")
        store.downgrade(engine, "0009")
        assert _versions(engine) == []
        store.upgrade(engine)
        assert store.current_revision(engine) == store.HEAD_REVISION
