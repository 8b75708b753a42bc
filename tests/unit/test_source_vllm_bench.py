"""`vllm bench serve --save-result` JSON becomes one measured profile, exact per position.

The results are built by tests.helpers.vllm_bench_result with vLLM's field names and arithmetic
(vllm-project/vllm 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1, vllm/benchmarks/serve.py)."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from registry_db.errors import InvalidInput
from registry_db.model import Sampling
from registry_db.sources.counters.common import Facts
from registry_db.sources.counters.detect import measure_run
from registry_db.sources.counters.vllm_bench import read_vllm_bench
from tests.helpers import run_cli as run
from tests.helpers import vllm_bench_result

FACTS = Facts(model="example-model", method="eagle3", k=3, thinking="off", category="coding",
              hardware="b300", engine_image="vllm/vllm-openai:v0.34.0",
              sampling=Sampling(temperature=0.6))
BEFORE = (2000, 6000, 3000, (1400, 1000, 600))
AFTER = (40001, 120003, 61137, (29003, 19501, 12633))
ARGS = ["--model", "m", "--method", "eagle3", "--k", "3", "--thinking", "off", "--category",
        "coding", "--hardware", "b300", "--engine-image", "i", "--temperature", "0.6"]


def write(tmp_path, *results, name="run.json") -> str:
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(r) for r in results) + "\n")
    return str(path)


def refused(path, **kwargs) -> list:
    with pytest.raises(InvalidInput) as exc:
        read_vllm_bench(path, FACTS, **kwargs)
    return exc.value.findings


def test_counts_and_per_position_counts_are_recovered_exactly(tmp_path):
    result = read_vllm_bench(write(tmp_path, vllm_bench_result(BEFORE, AFTER)), FACTS)
    (p,) = result.sets[0].profiles
    drafts, accepted = 38001, 58137
    assert (p.counts.drafts, p.counts.draft_tokens, p.counts.accepted_tokens) == (
        drafts, 114003, accepted)
    assert p.counts.accepted_per_position == (27603, 18501, 12033)
    assert p.acceptance_length == float(1 + Fraction(accepted, drafts))
    assert p.per_position_rates == tuple(n / drafts for n in (27603, 18501, 12033))
    assert result.warnings == ()


def test_check_detects_the_form_and_reads_the_same_counts(tmp_path):
    path = write(tmp_path, vllm_bench_result(BEFORE, AFTER))
    name, measured = measure_run(path, None, 3)
    assert name == "vllm-bench" and measured.tally.counts().drafts == 38001


def test_a_result_without_spec_decode_fields_says_why(tmp_path):
    plain = {k: v for k, v in vllm_bench_result(BEFORE, AFTER).items()
             if not k.startswith("spec_decode")}
    (finding,) = refused(write(tmp_path, plain))
    assert finding.code == "no_spec_decode_fields" and "without speculative" in finding.message


def test_a_negative_delta_is_a_restart(tmp_path):
    down = vllm_bench_result(AFTER, (1000, 3000, 1500, (700, 500, 300)))
    findings = refused(write(tmp_path, down))
    assert {f.code for f in findings} == {"server_restarted"}


def test_rates_that_are_no_counts_over_the_drafts_are_refused(tmp_path):
    edited = vllm_bench_result(BEFORE, AFTER)
    edited["spec_decode_per_position_acceptance_rates"][1] += 1e-9
    (finding,) = refused(write(tmp_path, edited))
    assert finding.code == "inconsistent_counters" and "position 1" in finding.message


def test_appended_results_need_one_picked(tmp_path):
    second = vllm_bench_result((0, 0, 0, (0, 0, 0)), (100, 300, 150, (70, 50, 30)))
    path = write(tmp_path, vllm_bench_result(BEFORE, AFTER), second)
    (finding,) = refused(path)
    assert finding.code == "several_runs" and "--result N" in finding.message
    p = read_vllm_bench(path, FACTS, run=2).sets[0].profiles[0]
    assert p.acceptance_length == 2.5


def test_wrong_k_names_the_positions(tmp_path):
    facts = Facts(**{**FACTS.__dict__, "k": 4})
    with pytest.raises(InvalidInput) as exc:
        read_vllm_bench(write(tmp_path, vllm_bench_result(BEFORE, AFTER)), facts)
    assert [f.code for f in exc.value.findings] == ["bad_positions"]


def test_the_cli_writes_a_profile(tmp_path):
    out = tmp_path / "m.yaml"
    result = run("ingest", "vllm-bench", write(tmp_path, vllm_bench_result(BEFORE, AFTER)),
                 *ARGS, "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert "accepted_per_position:" in out.read_text()
    assert "source: 'vllm bench serve result: " in out.read_text() or \
        "source: vllm bench serve result: " in out.read_text()
