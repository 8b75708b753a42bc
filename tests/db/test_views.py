"""The analysts' views return the expected rows, on SQLite and PostgreSQL alike.

The seed alone, then the seed with a second set (written as YAML and imported like any file)
that holds one of the seed's keys with per-position rates, and an `assumed` profile without a
provenance.
"""

from __future__ import annotations

import pytest

from registry_db.importing import write as importer
from registry_db.store.query import run_query
from tests.helpers import SEED

_GOLDEN = ("https://github.com/SemiAnalysisAI/InferenceX/blob/main/inferencex-e2e/infx/"
           "golden_al_distribution/")
DSV41 = _GOLDEN + "dsv41flash_dspark.yaml"
GLM = _GOLDEN + "glm5.3_mtp.yaml"
DSV41_RUN = "https://github.com/SemiAnalysisAI/InferenceX/actions/runs/34493175056"
GLM_RUN = "https://github.com/SemiAnalysisAI/InferenceX/actions/runs/28058352479"

OVERRIDES = """\
kind: AcceptanceProfileSet
name: team-overrides
caveats:
  - Read from a paper, for comparison.
profiles:
  - model: deepseek-v4.1-flash
    speculative_method: dspark
    num_spec_tokens: 5
    thinking: "off"
    category: coding
    acceptance_length: 4.2
    per_position_rates: [1.0, 0.9, 0.7, 0.4, 0.2]
    method: literature
    rationale: The paper's table 3.
    provenance:
      source: https://example.org/paper.pdf
  - model: tiny-model
    speculative_method: eagle
    num_spec_tokens: 2
    thinking: "on"
    category: chat
    acceptance_length: 1.8
    method: assumed
    rationale: No measurement yet.
"""


@pytest.fixture
def seeded_url(engine, db_url) -> str:
    """A database holding only the seed."""
    importer.import_paths(engine, [SEED])
    return db_url


@pytest.fixture
def two_sets_url(engine, db_url, tmp_path) -> str:
    """The seed and `team-overrides`."""
    path = tmp_path / "team-overrides.yaml"
    path.write_text(OVERRIDES, encoding="utf-8")
    importer.import_paths(engine, [SEED, path])
    return db_url


def rows(url: str, sql: str) -> list[tuple]:
    """The rows of a read-only query, as a list (the views' content, not the query boundary:
    run with the test's own role on PostgreSQL)."""
    return list(run_query(url, sql, trust_sql=True).rows)


def test_acceptance_profiles_on_the_seed(seeded_url):
    got = rows(seeded_url, """
        SELECT profile_set, model, speculative_method, num_spec_tokens, thinking, category,
               acceptance_length, method, profile, source, run, benchmark, prompts, hardware,
               engine_image, tp, temperature, top_p, top_k, max_tokens, copied_from, has_rates,
               position
        FROM acceptance_profiles ORDER BY position""")
    assert got == [
        ("inferencex-golden-al", "deepseek-v4.1-flash", "dspark", 5, "off", "coding", 4.07,
         "measured", "deepseek-v4.1-flash/dspark/k5/thinking-off/coding", DSV41, DSV41_RUN,
         "SPEED-Bench Qualitative", 80, "b300", "vllm/vllm-openai:deepseekv41-flash-0909", 4,
         1.0, None, None, 4096, None, 0, 0),
        ("inferencex-golden-al", "deepseek-v4.1-flash", "dspark", 5, "on", "coding", 3.51,
         "measured", "deepseek-v4.1-flash/dspark/k5/thinking-on/coding", DSV41, DSV41_RUN,
         "SPEED-Bench Qualitative", 80, "b300", "vllm/vllm-openai:deepseekv41-flash-0909", 4,
         1.0, None, None, 4096, None, 0, 1),
        ("inferencex-golden-al", "glm-5.3", "mtp", 3, "on", "coding", 2.99, "copied",
         "glm-5.3/mtp/k3/thinking-on/coding", GLM, GLM_RUN, None, None, "b300", None, None,
         1.0, 0.95, None, 4096, "glm-5.2-fp8/mtp/k3/thinking-on/coding", 0, 2),
    ]
    (rationale,), = rows(seeded_url, "SELECT rationale FROM acceptance_profiles "
                                     "WHERE method = 'copied'")
    assert rationale.startswith("Provisional. GLM-5.3 shares GLM-5.2's base")


def test_profiles_sharing_a_provenance_share_its_id(seeded_url):
    got = rows(seeded_url, "SELECT COUNT(DISTINCT provenance_id), COUNT(*) "
                           "FROM acceptance_profiles")
    assert got == [(2, 3)]


def test_acceptance_rate_is_al_minus_one_over_k(two_sets_url):
    got = rows(two_sets_url, "SELECT acceptance_length, num_spec_tokens, acceptance_rate "
                             "FROM acceptance_profiles")
    assert len(got) == 5
    for al, k, rate in got:
        assert rate == pytest.approx((al - 1) / k, rel=1e-12, abs=1e-15)


def test_a_profile_without_a_provenance_still_has_its_row(two_sets_url):
    got = rows(two_sets_url, "SELECT profile, method, provenance_id, source, hardware "
                             "FROM acceptance_profiles WHERE profile_set = 'team-overrides' "
                             "ORDER BY position")
    assert got == [
        ("deepseek-v4.1-flash/dspark/k5/thinking-off/coding", "literature", got[0][2],
         "https://example.org/paper.pdf", None),
        ("tiny-model/eagle/k2/thinking-on/chat", "assumed", None, None, None),
    ]
    assert got[0][2] is not None


def test_profile_conflicts(two_sets_url):
    got = rows(two_sets_url, "SELECT * FROM profile_conflicts")
    assert got == [("deepseek-v4.1-flash", "dspark", 5, "off", "coding", 2, 4.07, 4.2)]


def test_profile_conflicts_is_empty_for_one_set(seeded_url):
    assert rows(seeded_url, "SELECT * FROM profile_conflicts") == []


def test_profile_rates_long(two_sets_url):
    got = rows(two_sets_url, """
        SELECT profile_set, model, num_spec_tokens, thinking, acceptance_length, position, rate
        FROM profile_rates_long ORDER BY position""")
    assert got == [
        ("team-overrides", "deepseek-v4.1-flash", 5, "off", 4.2, i + 1, rate)
        for i, rate in enumerate([1.0, 0.9, 0.7, 0.4, 0.2])
    ]
    (has_rates,) = rows(two_sets_url, "SELECT has_rates FROM acceptance_profiles "
                                      "WHERE profile_set = 'team-overrides' AND position = 0")
    assert has_rates == (1,)


def test_provenance_details(two_sets_url):
    got = rows(two_sets_url, """
        SELECT source, hardware, temperature, top_p, setting_name, setting_value, setting_type,
               profile_count
        FROM provenance_details ORDER BY source, setting_name""")
    assert got == [
        ("https://example.org/paper.pdf", None, None, None, None, None, None, 1),
        (DSV41, "b300", 1.0, None, "draft_sample_method", "probabilistic", "string", 2),
        (DSV41, "b300", 1.0, None, "rejection_sample_method", "block", "string", 2),
        (GLM, "b300", 1.0, 0.95, None, None, None, 1),
    ]


def test_set_overview(two_sets_url):
    got = rows(two_sets_url, "SELECT profile_set, profile_count, caveat_count, "
                             "LENGTH(content_hash) FROM set_overview ORDER BY profile_set")
    assert got == [("inferencex-golden-al", 3, 3, 64), ("team-overrides", 2, 1, 64)]
    (stamp,) = rows(two_sets_url, "SELECT imported_at FROM set_overview "
                                  "WHERE profile_set = 'team-overrides'")
    assert stamp[0] is not None


def test_profile_coverage_is_the_whole_grid(two_sets_url):
    """3 (model, method) pairs x 2 thinking modes x 2 categories x K 1..5 = 60 cells, one row
    each, plus one more row for the cell both sets hold."""
    (count,) = rows(two_sets_url, "SELECT COUNT(*) FROM profile_coverage")
    assert count == (61,)
    (cells,) = rows(two_sets_url, """
        SELECT COUNT(*) FROM (SELECT DISTINCT model, speculative_method, thinking, category,
                                              num_spec_tokens FROM profile_coverage) c""")
    assert cells == (60,)
    present = rows(two_sets_url, """
        SELECT model, speculative_method, thinking, category, num_spec_tokens, profile_set,
               acceptance_length, method, set_count
        FROM profile_coverage WHERE profile_set IS NOT NULL
        ORDER BY model, thinking, category, num_spec_tokens, profile_set""")
    assert present == [
        ("deepseek-v4.1-flash", "dspark", "off", "coding", 5, "inferencex-golden-al", 4.07,
         "measured", 2),
        ("deepseek-v4.1-flash", "dspark", "off", "coding", 5, "team-overrides", 4.2,
         "literature", 2),
        ("deepseek-v4.1-flash", "dspark", "on", "coding", 5, "inferencex-golden-al", 3.51,
         "measured", 1),
        ("glm-5.3", "mtp", "on", "coding", 3, "inferencex-golden-al", 2.99, "copied", 1),
        ("tiny-model", "eagle", "on", "chat", 2, "team-overrides", 1.8, "assumed", 1),
    ]


def test_profile_coverage_missing_cells(two_sets_url):
    """A missing cell is one row with no set, no profile and no value, and set_count 0."""
    got = rows(two_sets_url, """
        SELECT COUNT(*), COUNT(profile_id), COUNT(acceptance_length), COUNT(method),
               MAX(set_count)
        FROM profile_coverage WHERE profile_set IS NULL""")
    assert got == [(56, 0, 0, 0, 0)]
    # glm-5.3 with thinking off has no curve at all: every K of it is missing.
    got = rows(two_sets_url, """
        SELECT num_spec_tokens FROM profile_coverage
        WHERE model = 'glm-5.3' AND thinking = 'off' AND category = 'coding'
              AND profile_set IS NULL
        ORDER BY num_spec_tokens""")
    assert got == [(1,), (2,), (3,), (4,), (5,)]


def test_profile_coverage_of_an_empty_registry(db_url):
    assert rows(db_url, "SELECT COUNT(*) FROM profile_coverage") == [(0,)]
