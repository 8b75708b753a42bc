"""SGLang's tree drafting (speculative_eagle_topk > 1): the run's K is speculative_num_steps,
and SGLang's proposed count is not held to it. No database.

Each request's ``meta_info`` is built as sgl-project/sglang
9155cf0e6effbca15e163d04907ff1933b684b3a
``python/sglang/srt/managers/tokenizer_manager_components/spec_decoding_meta.py``
(``fill_spec_decoding_meta``) writes it: ``spec_proposed_drafts = spec_verify_ct x
(speculative_num_draft_tokens - 1)``, ``spec_accepted_drafts``, ``spec_verify_ct``,
``spec_accept_rate``, ``spec_accept_length = completion_tokens / spec_verify_ct`` and
``spec_accept_histogram`` (entry n: the steps that accepted n drafts); newer releases
(29ff63a5, the same function) add ``spec_num_correct_drafts`` and
``spec_num_proposed_drafts`` under the same formula. With num_steps 5, topk 4 and
num_draft_tokens 8, a step proposes 7 tree nodes and accepts at most 5 drafts.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry_db.errors import InvalidInput
from registry_db.model import Sampling
from registry_db.sources.counters.common import Facts
from registry_db.sources.counters.sglang import measure, read_sglang
from tests.helpers import run_cli as run

STEPS, TOPK, DRAFT_TOKENS = 5, 4, 8


def meta_info(rid: str, accepted_per_step: list[int], num_draft_tokens: int, k: int,
              new_names: bool = True) -> dict:
    """One finished request's meta_info, as fill_spec_decoding_meta fills it."""
    verify = len(accepted_per_step)
    accepted = sum(accepted_per_step)
    proposed = verify * (num_draft_tokens - 1)
    histogram = [accepted_per_step.count(n) for n in range(k + 1)]
    meta = {"id": rid, "finish_reason": {"type": "stop"}, "prompt_tokens": 512,
            "completion_tokens": accepted + verify, "cached_tokens": 0,
            "spec_accept_rate": accepted / proposed,
            "spec_accept_length": (accepted + verify) / verify,
            "spec_accepted_drafts": accepted, "spec_proposed_drafts": proposed,
            "spec_verify_ct": verify, "spec_accept_histogram": histogram}
    if new_names:
        meta.update(spec_num_correct_drafts=accepted, spec_num_proposed_drafts=proposed,
                    spec_correct_drafts_histogram=histogram)
    return {"text": "...", "meta_info": meta}


REQUESTS = [[5, 3, 0, 2, 5, 1], [4, 4, 5, 0], [1, 2, 3, 5, 5, 5, 2]]


def responses(tmp_path: Path, requests=REQUESTS, num_draft_tokens=DRAFT_TOKENS, k=STEPS,
              new_names=True) -> str:
    path = tmp_path / "responses.jsonl"
    path.write_text("".join(json.dumps(meta_info(f"r{i}", steps, num_draft_tokens, k,
                                                 new_names)) + "\n"
                            for i, steps in enumerate(requests)))
    return str(path)


FACTS = Facts(model="glm-5.2", method="eagle", k=STEPS, thinking="on", category="coding",
              hardware="h200", engine_image="lmsysorg/sglang:v0.5.23",
              sampling=Sampling(temperature=1.0))


@pytest.mark.parametrize("new_names", [True, False])
def test_tree_drafting_reads_at_k_num_steps(tmp_path, new_names):
    result = read_sglang(responses(tmp_path, new_names=new_names), FACTS)
    (p,) = result.sets[0].profiles
    verify = sum(len(r) for r in REQUESTS)
    accepted = sum(sum(r) for r in REQUESTS)
    assert p.num_spec_tokens == STEPS and p.key[2] == 5
    assert Fraction(p.acceptance_length) == Fraction(float(1 + Fraction(accepted, verify)))
    assert p.counts.drafts == verify and p.counts.draft_tokens == STEPS * verify
    settings_ = dict(p.provenance.settings)
    assert settings_["spec_num_proposed_drafts"] == verify * (DRAFT_TOKENS - 1)
    assert settings_["speculative_num_draft_tokens"] == DRAFT_TOKENS
    assert [w.code for w in result.warnings] == ["tree_drafting"]
    assert "speculative_num_draft_tokens 8" in result.warnings[0].message


def test_a_chain_keeps_the_proposed_count_and_no_warning(tmp_path):
    m = measure(responses(tmp_path, num_draft_tokens=STEPS + 1), None, STEPS)
    assert m.tally.draft_tokens == STEPS * sum(len(r) for r in REQUESTS)
    assert m.warnings == ()


def test_a_step_accepting_more_than_k_is_still_refused(tmp_path):
    """A chain of 7 given --k 5: the histogram shows steps past K, so --k is wrong."""
    with pytest.raises(InvalidInput) as exc:
        measure(responses(tmp_path, requests=[[7, 6, 1]], k=7), None, STEPS)
    assert [f.code for f in exc.value.findings] == ["bad_positions"]


def test_cli_writes_a_profile_keyed_k5(tmp_path):
    out = tmp_path / "glm-tree.yaml"
    result = run("ingest", "sglang", responses(tmp_path), "--model", "glm-5.2", "--method",
                 "eagle", "--k", "5", "--thinking", "on", "--category", "coding",
                 "--hardware", "h200", "--engine-image", "lmsysorg/sglang:v0.5.23",
                 "--temperature", "1.0", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert "num_spec_tokens: 5" in out.read_text() and "tree drafting" in result.stderr


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(k=st.integers(1, 6), extra=st.integers(0, 9), data=st.data())
def test_differential_against_the_raw_steps(tmp_path_factory, k, extra, data):
    """Steps' accepted drafts summed independently; num_draft_tokens from K + 1 (a chain) up."""
    requests = data.draw(st.lists(st.lists(st.integers(0, k), min_size=1, max_size=8),
                                  min_size=1, max_size=5))
    path = responses(tmp_path_factory.mktemp("sglang"), requests, k + 1 + extra, k)
    m = measure(path, None, k)
    steps = [n for r in requests for n in r]
    assert 1 + m.tally.accepted / m.tally.drafts == 1 + Fraction(sum(steps), len(steps))
    assert m.tally.draft_tokens == k * len(steps)
    assert m.tally.per_position == tuple(sum(1 for n in steps if n >= i)
                                         for i in range(1, k + 1))
    assert [w.code for w in m.warnings] == (["tree_drafting"] if extra else [])
