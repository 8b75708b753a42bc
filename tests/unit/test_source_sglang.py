"""SGLang's per-request meta_info becomes one measured profile. No database.

tests/data/sources/sglang/responses.jsonl holds four ``/generate`` responses as SGLang writes
them: the ``meta_info`` keys of sgl-project/sglang 29ff63a5fbf735d9d975f76ccee2d0fdbfd416e5
python/sglang/srt/managers/tokenizer_manager_components/output_processor.py (id, finish_reason,
prompt_tokens, weight_version, num_retractions, reasoning_tokens, completion_tokens,
cached_tokens, e2e_latency) and the spec_* keys ``fill_spec_decoding_meta`` adds
(spec_decoding_meta.py: spec_accept_rate, spec_accept_length = completion_tokens /
spec_verify_ct, spec_num_correct_drafts, spec_num_proposed_drafts = spec_verify_ct x
(speculative_num_draft_tokens - 1), spec_verify_ct, and the backward-compat aliases
spec_accepted_drafts, spec_proposed_drafts; spec_correct_drafts_histogram and its alias
spec_accept_histogram). The histogram's entry n counts the steps that accepted n drafts
(``Req.update_spec_acceptance_histogram(accepted_draft_tokens)``, schedule_batch.py).
Releases before the rename (sglang 9155cf0e6effbca15e163d04907ff1933b684b3a,
spec_decoding_meta.py) wrote only spec_accepted_drafts, spec_proposed_drafts and
spec_accept_histogram.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from registry_db.errors import InvalidInput
from registry_db.model import Counts, Sampling
from registry_db.sources import get_source
from registry_db.sources.counters.common import Facts
from registry_db.sources.counters.sglang import read_sglang
from tests.helpers import run_cli as run

DATA = Path(__file__).resolve().parents[1] / "data" / "sources" / "sglang"
FILE = str(DATA / "responses.jsonl")
FACTS = Facts(model="glm-5.2", method="eagle", k=3, thinking="on", category="coding",
              hardware="h200", engine_image="lmsysorg/sglang:v0.5.15",
              sampling=Sampling(temperature=1.0))
HISTOGRAMS = ([1, 2, 3, 4], [2, 2, 2, 2], [0, 0, 1, 4], [3, 1, 1, 2])
VERIFY = sum(sum(h) for h in HISTOGRAMS)                                      # 30
CORRECT = sum(n * c for h in HISTOGRAMS for n, c in enumerate(h))             # 55
STEPS = [sum(h[n] for h in HISTOGRAMS) for n in range(4)]                     # [6, 5, 7, 12]
AT_LEAST = tuple(sum(STEPS[i:]) for i in range(1, 4))                         # (24, 19, 12)


def profile(path=FILE, facts=FACTS, **kwargs):
    result = read_sglang(str(path), facts, **kwargs)
    (ps,) = result.sets
    (p,) = ps.profiles
    return p, result


def refused(path, facts=FACTS) -> list:
    with pytest.raises(InvalidInput) as exc:
        read_sglang(str(path), facts)
    return exc.value.findings


def records() -> list[dict]:
    return [json.loads(line) for line in Path(FILE).read_text().splitlines()]


def write(tmp_path, rows, name="edited.jsonl") -> str:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_al_is_one_plus_correct_over_verify_exactly_and_the_histogram_gives_the_rates():
    p, result = profile()
    assert 1 + Fraction(CORRECT, VERIFY) == Fraction(17, 6)
    assert Fraction(p.acceptance_length) == Fraction(float(Fraction(17, 6)))
    assert p.per_position_rates == tuple(float(Fraction(a, VERIFY)) for a in AT_LEAST)
    assert p.counts == Counts(VERIFY, 3 * VERIFY, CORRECT, AT_LEAST)
    assert result.warnings == ()


def test_the_source_protocol_and_its_registry_row():
    sets, findings = get_source("sglang").read([FILE], facts=FACTS)
    assert findings == [] and sets[0].profiles[0].counts.accepted_tokens == CORRECT


def test_the_older_field_names_read_alike(tmp_path):
    rows = records()
    for r in rows:
        for new in ("spec_num_correct_drafts", "spec_num_proposed_drafts",
                    "spec_correct_drafts_histogram"):
            del r["meta_info"][new]
    old, _ = profile(write(tmp_path, rows))
    new, _ = profile()
    assert (old.acceptance_length, old.per_position_rates, old.counts) == (
        new.acceptance_length, new.per_position_rates, new.counts)


def test_bare_meta_info_objects_and_a_batch_array_read_alike(tmp_path):
    rows = [r["meta_info"] for r in records()]
    path = tmp_path / "batch.jsonl"
    path.write_text(json.dumps(rows[:2]) + "\n" + "\n".join(json.dumps(r) for r in rows[2:]))
    assert profile(path)[0].counts == profile()[0].counts


def test_without_histograms_al_stands_and_no_rates_are_given(tmp_path):
    rows = records()
    for r in rows:
        del r["meta_info"]["spec_correct_drafts_histogram"], r["meta_info"]["spec_accept_histogram"]
    p, result = profile(write(tmp_path, rows))
    assert p.per_position_rates is None and p.counts == Counts(VERIFY, 90, CORRECT)
    assert result.warnings == ()
    del rows[0]  # some with, some without: no rates, said
    with_some = records()[:1] + rows
    p, result = profile(write(tmp_path, with_some, "some.jsonl"))
    assert p.per_position_rates is None and [w.code for w in result.warnings] == [
        "partial_histogram"]


def test_the_prometheus_gauge_is_refused_as_not_a_count(tmp_path):
    """sglang:spec_accept_length is a Gauge (SGLang's metrics collector), set per interval."""
    path = tmp_path / "metrics.prom"
    path.write_text("# HELP sglang:spec_accept_length The average acceptance length of "
                    "speculative decoding.\n# TYPE sglang:spec_accept_length gauge\n"
                    'sglang:spec_accept_length{model_name="glm-5.2"} 2.83\n')
    (finding,) = refused(path)
    assert finding.code == "not_a_count" and finding.line == 3
    assert "is a gauge" in finding.message and "not a count" in finding.message


def test_a_ratio_alone_is_refused_with_its_line(tmp_path):
    rows = records()
    for key in ("spec_num_correct_drafts", "spec_accepted_drafts", "spec_verify_ct"):
        del rows[1]["meta_info"][key]
    (finding,) = refused(write(tmp_path, rows))
    assert (finding.line, finding.code, finding.path) == (
        2, "not_a_count", "meta_info.spec_accept_length")
    assert "ratio" in finding.message


def test_a_request_twice_is_refused(tmp_path):
    rows = records()
    (finding,) = refused(write(tmp_path, rows + rows[:1]))
    assert (finding.line, finding.code) == (5, "repeated_request")
    assert "also on line 1" in finding.message


def test_requests_without_spec_fields_are_skipped_with_a_warning(tmp_path):
    rows = records()
    rows.insert(1, {"text": "x", "meta_info": {"id": "z9", "completion_tokens": 1}})
    p, result = profile(write(tmp_path, rows))
    assert p.counts.drafts == VERIFY
    (warning,) = result.warnings
    assert (warning.code, warning.line, warning.severity) == ("no_spec_fields", 2, "warning")


def test_a_histogram_that_disagrees_keeps_al_and_drops_the_rates(tmp_path):
    rows = records()
    rows[2]["meta_info"]["spec_correct_drafts_histogram"] = [0, 0, 2, 3]
    p, result = profile(write(tmp_path, rows))
    assert p.per_position_rates is None and p.counts.accepted_tokens == CORRECT
    assert [(w.code, w.line) for w in result.warnings] == [("inconsistent_histogram", 3)]


@pytest.mark.parametrize("edit, code", [
    (lambda m: m.update(spec_verify_ct=-1), "not_a_count"),
    (lambda m: m.update(spec_verify_ct=True), "not_a_count"),
    (lambda m: m.update(spec_num_correct_drafts=100), "inconsistent_counters"),
    (lambda m: m.update(spec_correct_drafts_histogram=[1, 2, 3, 3, 1]), "bad_positions"),
])
def test_counts_no_sglang_writes_are_refused_with_their_line(tmp_path, edit, code):
    rows = records()
    edit(rows[3]["meta_info"])
    findings = refused(write(tmp_path, rows))
    assert [(f.line, f.code) for f in findings] == [(4, code)]


def test_not_json_names_line_and_column(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(Path(FILE).read_text() + '{"meta_info": {"spec_verify_ct": 3,}}\n')
    (finding,) = refused(path)
    assert (finding.line, finding.code) == (5, "not_json") and finding.column > 1


def test_no_speculation_at_all_is_an_error(tmp_path):
    (finding,) = refused(write(tmp_path, [{"text": "x", "meta_info": {"id": "q"}}]))
    assert finding.code == "zero_drafts"


ARGS = ["--model", "glm-5.2", "--method", "eagle", "--k", "3", "--thinking", "on", "--category",
        "coding", "--hardware", "h200", "--engine-image", "lmsysorg/sglang:v0.5.15",
        "--temperature", "1.0"]


def test_cli_reads_stdin_and_writes_a_valid_file(tmp_path):
    from registry_db.sources.profile_set import check_paths

    out = tmp_path / "glm-5.2-eagle.yaml"
    result = run("ingest", "sglang", "-", *ARGS, "-o", str(out), input=Path(FILE).read_text())
    assert result.exit_code == 0, result.stderr
    sets, findings = check_paths([out])
    (p,) = sets[0].profiles
    assert findings == [] and p.acceptance_length == float(Fraction(17, 6))
    assert p.provenance.source == "SGLang meta_info: <stdin>"
