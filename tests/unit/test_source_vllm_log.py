"""vLLM's server log: the SpecDecoding metrics lines summed into one measured profile.

Lines are built by tests.helpers.vllm_log_line with ``SpecDecodingLogging.log``'s own format
string and arithmetic (vllm-project/vllm ee4ceaae5953d367d8edd2132fd86d6c42506e1e,
vllm/v1/spec_decode/metrics.py); the start banner is ``run_server``'s ``"vLLM API server
version %s"`` (vllm/entrypoints/openai/api_server.py)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from registry_db.errors import InvalidInput
from registry_db.model import Sampling
from registry_db.sources.counters.common import Facts
from registry_db.sources.counters.detect import measure_run
from registry_db.sources.counters.vllm_log import read_vllm_log
from tests.helpers import run_cli as run
from tests.helpers import vllm_log_line

FACTS = Facts(model="example-model", method="mtp", k=3, thinking="on", category="coding",
              hardware="b300", engine_image="vllm/vllm-openai:v0.34.0",
              sampling=Sampling(temperature=1.0))
BANNER = "(APIServer pid=7) INFO 12-05 08:20:00 [api_server.py:1800] vLLM API server version 0.34.0"
#: (accepted, drafts, per position) of three 10 s intervals at K = 3; small enough that every
#: 3-decimal rate singles out its count.
INTERVALS = [(420, 300, (200, 130, 90)), (77, 41, (33, 25, 19)), (0, 5, (0, 0, 0))]


def log(tmp_path, lines, name="server.log") -> str:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def lines(intervals=INTERVALS, k=3):
    return [vllm_log_line(a, d * k, d, pos) for a, d, pos in intervals]


def refused(path, facts=FACTS) -> list:
    with pytest.raises(InvalidInput) as exc:
        read_vllm_log(path, facts)
    return exc.value.findings


def test_the_intervals_are_summed_exactly_with_their_per_position_counts(tmp_path):
    path = log(tmp_path, [BANNER, "INFO other line", *lines()])
    result = read_vllm_log(path, FACTS)
    (p,) = result.sets[0].profiles
    assert (p.counts.drafts, p.counts.draft_tokens, p.counts.accepted_tokens) == (
        346, 1038, 497)
    assert p.counts.accepted_per_position == (233, 155, 109)
    assert p.acceptance_length == float(1 + Fraction(497, 346))
    assert [w.code for w in result.warnings] == ["drafts_from_k"]


def test_check_detects_the_log_and_reads_the_same_counts(tmp_path):
    name, measured = measure_run(log(tmp_path, lines()), None, 3)
    assert name == "vllm-log" and measured.tally.counts().accepted_tokens == 497


def test_steps_that_drafted_fewer_than_k_are_refused_not_guessed(tmp_path):
    # 300 steps drafting 900 tokens would be AL 2.40; 870 tokens over 300 steps is printed
    line = vllm_log_line(420, 870, 300, (200, 130, 90))
    (finding,) = refused(log(tmp_path, [line]))
    assert finding.code == "drafts_unknown" and "K = 3" in finding.message
    # a multiple of K whose printed AL disagrees: 300 steps drafting 2 tokens each would be
    # 200 steps of K, AL 3.10, where the line prints 2.40 (a difference under 0.005 in AL is
    # not seen: that is what the drafts_from_k warning says)
    line = vllm_log_line(420, 600, 300, (200, 130, 90))
    (finding,) = refused(log(tmp_path, [line]))
    assert finding.code == "drafts_unknown" and "mean acceptance length 2.40" in finding.message


def test_a_second_server_start_between_lines_is_two_runs(tmp_path):
    first, second, third = lines()
    (finding,) = refused(log(tmp_path, [BANNER, first, BANNER, second, third]))
    assert finding.code == "server_restarted" and finding.line == 3
    assert "line 3" in finding.message


def test_rates_that_fit_several_counts_are_left_out_with_a_warning(tmp_path):
    big = [(42000, 30001, (20000, 13000, 9000))]
    result = read_vllm_log(log(tmp_path, lines(big)), FACTS)
    (p,) = result.sets[0].profiles
    assert p.per_position_rates is None and p.counts.accepted_per_position is None
    assert p.acceptance_length == float(1 + Fraction(42000, 30001))
    assert "rates_not_counts" in [w.code for w in result.warnings]


def test_a_log_without_spec_lines_says_why(tmp_path):
    (finding,) = refused(log(tmp_path, [BANNER, "INFO nothing"]))
    assert finding.code == "no_spec_decode_lines" and "--disable-log-stats" in finding.message


def test_the_cli_writes_a_profile_and_warns(tmp_path):
    out = tmp_path / "m.yaml"
    result = run("ingest", "vllm-log", log(tmp_path, lines()), "--model", "m", "--method",
                 "mtp", "--k", "3", "--thinking", "on", "--category", "coding", "--hardware",
                 "b300", "--engine-image", "i", "--temperature", "1", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert "drafted tokens / K = 3" in result.stderr
    assert "accepted_per_position:" in out.read_text()
