"""TensorRT-LLM's /metrics iteration stats become one measured profile. No database.

tests/data/sources/trtllm/stats.json is two ``GET /metrics`` answers appended (one per line):
trtllm-serve answers a JSON array of the iterations since the last call
(NVIDIA/TensorRT-LLM 000d7718575d87a0564064967030927d9fe66ab0,
docs/source/commands/trtllm-serve.rst, "Metrics and Monitoring"), each an ``IterationStats``
serialised with the field names of cpp/tensorrt_llm/executor/jsonSerialization.cpp
(092229bb6e1ce6e7f0db2ba010b7fdaf654e1549: ``NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SpecDecodingStats,
numDraftTokens, numAcceptedTokens, numRequestsWithDraftTokens, acceptanceLength, iterLatencyMS,
draftOverhead)`` inside ``IterationStats``, keys in nlohmann's sorted order), compact as the
server's JSON response writes it. The first iteration is prefill only (no drafts). AL is
TensorRT-LLM's own reduction, (Σ accepted + Σ requests) / Σ requests (its tests' helper
``compute_acceptance_length``, found through the index without its path).
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
from registry_db.sources.counters.trtllm import read_trtllm_stats
from tests.helpers import run_cli as run

DATA = Path(__file__).resolve().parents[1] / "data" / "sources" / "trtllm"
FILE = str(DATA / "stats.json")
FACTS = Facts(model="deepseek-v4", method="mtp", k=3, thinking="on", category="coding",
              hardware="gb300", engine_image="nvcr.io/nvidia/tensorrt-llm/release:1.3",
              sampling=Sampling(temperature=1.0))
#: (numDraftTokens, numAcceptedTokens, numRequestsWithDraftTokens) of iterations 2..4.
ITERATIONS = ((12, 7, 4), (12, 9, 4), (9, 4, 3))
DRAFT_TOKENS, ACCEPTED, REQUESTS = (sum(x[i] for x in ITERATIONS) for i in range(3))


def profile(path=FILE, facts=FACTS, **kwargs):
    result = read_trtllm_stats(str(path), facts, **kwargs)
    (ps,) = result.sets
    (p,) = ps.profiles
    return p, result


def refused(path, facts=FACTS) -> list:
    with pytest.raises(InvalidInput) as exc:
        read_trtllm_stats(str(path), facts)
    return exc.value.findings


def polls() -> list[list[dict]]:
    return [json.loads(line) for line in Path(FILE).read_text().splitlines()]


def write(tmp_path, answers, name="edited.json", indent=None) -> str:
    path = tmp_path / name
    path.write_text("".join(json.dumps(a, indent=indent) + "\n" for a in answers))
    return str(path)


def test_al_is_one_plus_accepted_over_requests_with_drafts_exactly():
    p, result = profile()
    assert 1 + Fraction(ACCEPTED, REQUESTS) == Fraction(31, 11)
    assert Fraction(p.acceptance_length) == Fraction(float(Fraction(31, 11)))
    assert p.per_position_rates is None
    assert p.counts == Counts(REQUESTS, DRAFT_TOKENS, ACCEPTED)
    assert p.counts.uncertainty(3).exact is False and result.warnings == ()


def test_the_source_protocol_and_its_registry_row():
    sets, findings = get_source("trtllm-stats").read([FILE], facts=FACTS)
    assert findings == [] and sets[0].profiles[0].counts.drafts == REQUESTS


def test_one_pretty_printed_answer_reads_alike_and_findings_name_its_lines(tmp_path):
    answer = [it for poll in polls() for it in poll]
    p, _ = profile(write(tmp_path, [answer], indent=4))
    assert p.counts == Counts(REQUESTS, DRAFT_TOKENS, ACCEPTED)
    answer[2]["specDecodingStats"]["numAcceptedTokens"] = -1
    path = write(tmp_path, [answer], indent=4)
    (finding,) = refused(path)
    line = Path(path).read_text().splitlines()[finding.line - 1]
    assert finding.code == "not_a_count" and line.strip() == "{"
    assert Path(path).read_text().splitlines()[finding.line].strip().startswith('"cpuMemUsage"')


def test_an_iteration_twice_is_refused_naming_both_lines(tmp_path):
    first, second = polls()
    (finding,) = refused(write(tmp_path, [first, second, second[1:]]))
    assert (finding.line, finding.code) == (3, "repeated_iteration")
    assert "also on line 2" in finding.message


def test_the_prometheus_output_is_refused_as_having_no_drafts_count(tmp_path):
    path = tmp_path / "metrics.prom"
    path.write_text("# HELP trtllm_kv_cache_hit_rate KV cache hit rate\n"
                    "# TYPE trtllm_kv_cache_hit_rate gauge\ntrtllm_kv_cache_hit_rate 0.5\n")
    (finding,) = refused(path)
    assert finding.code == "not_a_count" and "numRequestsWithDraftTokens" in finding.message


def test_acceptance_length_alone_is_refused_as_a_mean(tmp_path):
    answers = polls()
    stats = answers[1][0]["specDecodingStats"]
    del stats["numAcceptedTokens"], stats["numRequestsWithDraftTokens"]
    (finding,) = refused(write(tmp_path, answers))
    assert (finding.line, finding.code) == (2, "not_a_count")
    assert "acceptanceLength is the iteration's mean" in finding.message


def test_a_missing_field_is_named(tmp_path):
    answers = polls()
    del answers[1][1]["specDecodingStats"]["numRequestsWithDraftTokens"]
    del answers[1][1]["specDecodingStats"]["acceptanceLength"]
    (finding,) = refused(write(tmp_path, answers))
    assert (finding.line, finding.path, finding.code) == (
        2, "specDecodingStats.numRequestsWithDraftTokens", "missing_field")


def test_more_drafts_than_k_per_request_means_another_k(tmp_path):
    findings = refused(FILE, Facts(**{**FACTS.__dict__, "k": 2}))
    assert [f.code for f in findings] == ["draft_tokens_above_k"]


def test_fewer_drafts_than_k_per_request_warns(tmp_path):
    p, result = profile(facts=Facts(**{**FACTS.__dict__, "k": 4}))
    assert p.counts.draft_tokens == DRAFT_TOKENS
    assert [w.code for w in result.warnings] == ["draft_tokens_not_k_drafts"]


def test_no_speculation_is_an_error(tmp_path):
    (finding,) = refused(write(tmp_path, [polls()[0][:1]]))
    assert finding.code == "zero_drafts" and "enable_iter_perf_stats" in finding.message


ARGS = ["--model", "deepseek-v4", "--method", "mtp", "--k", "3", "--thinking", "on",
        "--category", "coding", "--hardware", "gb300", "--engine-image",
        "nvcr.io/nvidia/tensorrt-llm/release:1.3", "--temperature", "1.0"]


def test_cli_writes_a_valid_file(tmp_path):
    from registry_db.sources.profile_set import check_paths

    out = tmp_path / "deepseek-v4-mtp.yaml"
    result = run("ingest", "trtllm-stats", FILE, *ARGS, "-o", str(out))
    assert result.exit_code == 0, result.stderr
    sets, findings = check_paths([out])
    assert findings == [] and sets[0].profiles[0].acceptance_length == float(Fraction(31, 11))
