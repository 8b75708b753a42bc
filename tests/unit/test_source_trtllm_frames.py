"""TensorRT-LLM's iteration stats as its newest releases write them: one row per attention-DP
rank, numbered frames, dropped frames counted. No database.

The rows follow NVIDIA/TensorRT-LLM b11790149e0e12e52ea82ed7a4d51b51ea98dce6,
``tensorrt_llm/executor/iteration_stats.py``: ``_iteration_report`` names the fields (the
executor's public JSON contract, ``specDecodingStats`` with ``numDraftTokens``,
``numAcceptedTokens``, ``numRequestsWithDraftTokens``, ``acceptanceLength`` = (accepted +
requests) / requests, ``iterLatencyMS``, ``draftOverhead``), and ``_materialize_frame`` adds
``schedulerMode``, ``statsSequence`` and ``statsDroppedFrames`` to the frame's report, then
writes one row per ``rank_payloads`` entry, each a copy of that report (its
``specDecodingStats`` too) with its own ``attentionDpRank`` (without attention DP, one row with
``attentionDpRank`` 0). The numbering is ``PyExecutor._append_stats_frame``'s, as that commit's
``test_buffer_eviction_is_bounded_and_visible_after_drain`` pins it: ``statsSequence`` counts
the frames appended since the server started (from 1), ``statsDroppedFrames`` the frames its
bounded buffer evicted so far.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry_db.errors import InvalidInput
from registry_db.model import Counts, Sampling
from registry_db.sources.counters.common import Facts
from registry_db.sources.counters.trtllm import measure, read_trtllm_stats

K = 3
FACTS = Facts(model="deepseek-v4", method="mtp", k=K, thinking="on", category="coding",
              hardware="gb300", engine_image="nvcr.io/nvidia/tensorrt-llm/release:1.3",
              sampling=Sampling(temperature=1.0))


def spec_stats(draft_tokens: int, accepted: int, requests: int) -> dict:
    """``_iteration_report``'s specDecodingStats for one iteration's counts."""
    return {"numDraftTokens": draft_tokens, "numAcceptedTokens": accepted,
            "numRequestsWithDraftTokens": requests,
            "acceptanceLength": (accepted + requests) / requests if requests else 0.0,
            "iterLatencyMS": 2.0, "draftOverhead": 0.125}


def frame_rows(iteration: int, counts: tuple[int, int, int] | None, *, sequence: int,
               dropped: int, ranks: int | None) -> list[dict]:
    """The rows ``_materialize_frame`` writes for one frame."""
    base = {"timestamp": "12-05-2026 08:00:00.000000", "iter": iteration, "iterLatencyMS": 16.0,
            "newActiveRequestsQueueLatencyMS": 0.0, "numNewActiveRequests": 0,
            "numActiveRequests": 8, "numQueuedRequests": 0, "numCompletedRequests": 0,
            "maxNumActiveRequests": 64, "maxBatchSizeStatic": 0,
            "maxBatchSizeTunerRecommended": 0, "maxBatchSizeRuntime": 0,
            "maxNumTokensStatic": 0, "maxNumTokensTunerRecommended": 0,
            "maxNumTokensRuntime": 0, "gpuMemUsage": 1 << 30, "cpuMemUsage": 0,
            "pinnedMemUsage": 0, "kvCacheStats": None,
            "staticBatchingStats": {"numScheduledRequests": 0, "numContextRequests": 0,
                                    "numCtxTokens": 0, "numGenTokens": 0, "emptyGenSlots": 0},
            "inflightBatchingStats": {"numScheduledRequests": 8, "numContextRequests": 0,
                                      "numGenRequests": 8, "numPausedRequests": 0,
                                      "numCtxTokens": 0, "microBatchId": 0,
                                      "avgNumDecodedTokensPerIter": 0.0},
            "specDecodingStats": None if counts is None else spec_stats(*counts),
            "schedulerMode": "non_overlap", "statsSequence": sequence,
            "statsDroppedFrames": dropped}
    if not ranks:
        return [{**base, "attentionDpRank": 0}]
    rows = []
    for rank in range(ranks):
        row = dict(base)
        row["attentionDpRank"] = rank
        row["inflightBatchingStats"] = {**base["inflightBatchingStats"], "numGenRequests": 2}
        if rank != 0:
            row["numQueuedRequests"] = 0
        rows.append(row)
    return rows


def stats_file(tmp_path: Path, iterations: list[tuple[int, int, int] | None], *,
               ranks: int | None = None, lost: set[int] = frozenset(),
               evicted: set[int] = frozenset(), responses: int = 1) -> str:
    """One server run's frames (frame i is iteration i + 1, ``statsSequence`` i + 1) written
    as ``responses`` /metrics answers appended: ``evicted`` frames were dropped by the
    server's buffer (``statsDroppedFrames`` counts them), ``lost`` ones never reached the
    file."""
    rows: list[list[dict]] = [[] for _ in range(responses)]
    dropped = 0
    for i, counts in enumerate(iterations):
        if i in evicted:
            dropped += 1
            continue
        if i in lost:
            continue
        rows[i * responses // len(iterations)].extend(
            frame_rows(i + 1, counts, sequence=i + 1, dropped=dropped, ranks=ranks))
    path = tmp_path / "stats.json"
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows))
    return str(path)


def run_of(n: int) -> list[tuple[int, int, int] | None]:
    """n frames: a prefill frame, then 8 requests a step drafting K, accepting by a cycle."""
    pattern = (10, 9, 12, 7, 11, 8, 10, 6, 13)
    return [None] + [(8 * K, pattern[i % len(pattern)], 8) for i in range(n - 1)]


def expected_al(iterations, keep=lambda i: True) -> Fraction:
    kept = [c for i, c in enumerate(iterations) if c is not None and keep(i)]
    return 1 + Fraction(sum(c[1] for c in kept), sum(c[2] for c in kept))


def refused(path: str) -> list:
    with pytest.raises(InvalidInput) as exc:
        read_trtllm_stats(path, FACTS)
    return exc.value.findings


def test_attention_dp_rows_are_read_once_per_iteration(tmp_path):
    """300 iterations x 4 ranks: before, 900 'iteration N is also on line 1' errors."""
    iterations = run_of(300)
    result = read_trtllm_stats(stats_file(tmp_path, iterations, ranks=4), FACTS)
    (profile,) = result.sets[0].profiles
    drafts = sum(c[2] for c in iterations if c)
    assert profile.counts == Counts(drafts, K * drafts, sum(c[1] for c in iterations if c))
    assert Fraction(profile.acceptance_length) == Fraction(float(expected_al(iterations)))
    assert result.warnings == ()


def test_attention_dp_reads_as_the_same_run_without_it(tmp_path):
    iterations = run_of(40)
    with_dp = measure(stats_file(tmp_path, iterations, ranks=8), None, K)
    (tmp_path / "plain").mkdir()
    without = measure(stats_file(tmp_path / "plain", iterations), None, K)
    assert with_dp.tally == without.tally


def test_ranks_that_disagree_are_refused(tmp_path):
    path = stats_file(tmp_path, run_of(5), ranks=4)
    answer = json.loads(Path(path).read_text())
    row = next(r for r in answer if r["iter"] == 3 and r["attentionDpRank"] == 2)
    row["specDecodingStats"] = spec_stats(6, 2, 2)
    Path(path).write_text(json.dumps(answer, indent=1))
    (finding,) = refused(path)
    assert finding.code == "ranks_disagree" and "iteration 3" in finding.message
    assert "rank 2" in finding.message


@pytest.mark.parametrize("field, value", [("attentionDpRank", {"rank": 1}),
                                          ("statsSequence", -1), ("statsDroppedFrames", "2")])
def test_numbers_that_are_not_counts_are_refused_with_their_line(tmp_path, field, value):
    path = stats_file(tmp_path, run_of(5), ranks=2)
    answer = json.loads(Path(path).read_text())
    answer[0][field] = value
    Path(path).write_text(json.dumps(answer))
    findings = refused(path)
    assert (findings[0].code, findings[0].path, findings[0].line) == ("not_a_count", field, 1)


def test_one_rank_listed_twice_is_still_a_repeated_iteration(tmp_path):
    path = stats_file(tmp_path, run_of(5), ranks=2)
    answer = json.loads(Path(path).read_text())
    Path(path).write_text(json.dumps(answer + answer[4:5]))
    (finding,) = refused(path)
    assert finding.code == "repeated_iteration" and "rank 0" in finding.message


def test_every_tenth_frame_dropped_is_refused_saying_what_the_counts_cover(tmp_path):
    iterations = run_of(300)
    lost = {i for i in range(300) if i % 10 == 9 and i != 299}
    path = stats_file(tmp_path, iterations, evicted=lost, responses=3)
    # The frames received give another AL than the run's: the value that must not be stored.
    assert expected_al(iterations, lambda i: i not in lost) != expected_al(iterations)
    (finding,) = refused(path)
    assert finding.code == "dropped_frames" and finding.path == "statsDroppedFrames"
    assert "29 of the 300 frames" in finding.message and "0 -> 29" in finding.message
    assert "cover 271 of 300 iterations (90.3%)" in finding.message
    received = float(expected_al(iterations, lambda i: i not in lost))
    assert f"would be {received!r}" in finding.message


def test_frames_missing_from_the_file_are_refused_by_their_numbers(tmp_path):
    """Lines lost after the server sent them: statsDroppedFrames stays, statsSequence skips."""
    iterations = run_of(50)
    (finding,) = refused(stats_file(tmp_path, iterations, lost={10, 20, 30}))
    assert finding.code == "dropped_frames" and "statsDroppedFrames 0 -> 0" in finding.message
    assert "3 of the 50 frames" in finding.message


def test_frames_dropped_before_the_first_one_are_refused(tmp_path):
    """A buffer that overflowed before the drain: the run's start may be what it dropped."""
    iterations = run_of(50)
    (finding,) = refused(stats_file(tmp_path, iterations, evicted=set(range(10))))
    assert finding.code == "dropped_frames"
    assert "statsDroppedFrames is 10 at the first frame (statsSequence 11)" in finding.message


def test_responses_out_of_order_are_refused(tmp_path):
    path = stats_file(tmp_path, run_of(40), responses=2)
    first, second = Path(path).read_text().splitlines()
    Path(path).write_text(second + "\n" + first + "\n")
    findings = refused(path)
    assert [f.code for f in findings] == ["frames_out_of_order"]


def test_several_responses_of_one_run_read_as_one(tmp_path):
    iterations = run_of(60)
    m = measure(stats_file(tmp_path, iterations, ranks=2, responses=4), None, K)
    assert 1 + m.tally.accepted / m.tally.drafts == expected_al(iterations)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.one_of(st.none(), st.lists(st.integers(0, K), min_size=0,
                                                     max_size=6)), min_size=2, max_size=40),
       ranks=st.sampled_from([None, 2, 4, 8]), responses=st.integers(1, 3),
       drop=st.sets(st.integers(0, 38), max_size=3), evict=st.booleans())
def test_differential_against_the_raw_steps(tmp_path_factory, steps, ranks, responses, drop,
                                            evict):
    """Per step, the drafts each request accepted (the raw counters), summed independently:
    the reader gives exactly 1 + Σ accepted / Σ requests, or refuses when a frame is missing."""
    iterations = [None if s is None else (K * len(s), sum(s), len(s)) for s in steps]
    # A frame lost from the file before the first one received cannot be seen (a response
    # after an earlier drain starts past 1 too); the server's own evictions always can.
    dropped = {i for i in drop if i < len(steps) - 1 and (evict or i > 0)}
    path = stats_file(tmp_path_factory.mktemp("stats"), iterations, ranks=ranks,
                      responses=min(responses, len(steps)),
                      lost=set() if evict else dropped, evicted=dropped if evict else set())
    requests = sum(len(s) for s in steps if s is not None)
    try:
        m = measure(path, None, K)
    except InvalidInput as exc:
        codes = {f.code for f in exc.findings}
        assert codes == ({"dropped_frames"} if dropped else {"zero_drafts"})
        assert dropped or requests == 0
        return
    assert not dropped and requests > 0
    assert m.tally.drafts == requests
    assert m.tally.accepted == sum(sum(s) for s in steps if s is not None)
    assert m.tally.draft_tokens == K * requests
