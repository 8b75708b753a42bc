"""A server restart between two scrapes is refused from every signal the producer gives: the
counters' ``_created`` samples, ``process_start_time_seconds`` and a counter that went down.

The scrapes are built by tests.helpers.vllm_scrape: the counters registered as vLLM registers
them (vllm-project/vllm ee4ceaae, vllm/v1/spec_decode/metrics.py ``SpecDecodingProm``) and
rendered by prometheus_client 0.26 itself (text and OpenMetrics exposition).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from registry_db.errors import InvalidInput
from registry_db.model import Sampling
from registry_db.sources.counters.common import Facts
from registry_db.sources.counters.detect import measure_run
from registry_db.sources.counters.vllm import read_vllm_metrics
from tests.helpers import run_cli as run
from tests.helpers import vllm_scrape

FACTS = Facts(model="example-model", method="eagle3", k=3, thinking="off", category="coding",
              hardware="b300", engine_image="vllm/vllm-openai:v0.34.0",
              sampling=Sampling(temperature=0.6))
#: The issue's two creation times: the server of BEFORE and the one of AFTER.
FIRST, SECOND = 1796451477.54, 1796451479.07


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def pair(tmp_path, *, created=(FIRST, FIRST), started=(None, None), openmetrics=False,
         before=(0, (2000, 6000, 3000, (1400, 1000, 600))),
         after=(0, (40000, 120000, 61000, (29000, 19500, 12500)))) -> tuple[str, str]:
    """BEFORE and AFTER scrapes of one engine; every counter ends higher in AFTER."""
    suffix = ".openmetrics" if openmetrics else ".prom"
    b = write(tmp_path, "before" + suffix, vllm_scrape(
        {before[0]: before[1]}, created=created[0], started=started[0],
        openmetrics=openmetrics))
    a = write(tmp_path, "after" + suffix, vllm_scrape(
        {after[0]: after[1]}, created=created[1], started=started[1], openmetrics=openmetrics))
    return b, a


def refusal(after: str, before: str) -> list:
    with pytest.raises(InvalidInput) as exc:
        read_vllm_metrics(after, before, FACTS)
    return exc.value.findings


@pytest.mark.parametrize("openmetrics", [False, True])
def test_counters_made_at_another_time_are_a_restart_naming_both_times(tmp_path, openmetrics):
    before, after = pair(tmp_path, created=(FIRST, SECOND), openmetrics=openmetrics)
    findings = refusal(after, before)
    restarted = [f for f in findings if f.code == "server_restarted"]
    assert restarted and {f.code for f in findings} == {"server_restarted"}
    first = restarted[0]
    assert "1796451477.54" in first.message and "1796451479.07" in first.message
    assert "2026-12-05" in first.message and first.file == after and first.line > 0
    assert f"BEFORE ({before}:" in first.message and "_created" in first.message
    # one finding per counter, not one per series
    assert len(restarted) == 4


def test_a_new_process_start_time_is_a_restart(tmp_path):
    before, after = pair(tmp_path, started=(FIRST - 60, SECOND - 1))
    (finding,) = refusal(after, before)
    assert finding.code == "server_restarted" and finding.path == "process_start_time_seconds"
    assert repr(FIRST - 60) in finding.message and repr(SECOND - 1) in finding.message


def test_one_server_run_with_every_signal_reads_as_before(tmp_path):
    before, after = pair(tmp_path, created=(FIRST, FIRST), started=(FIRST - 60, FIRST - 60))
    result = read_vllm_metrics(after, before, FACTS)
    (p,) = result.sets[0].profiles
    assert p.counts.drafts == 38000 and p.counts.accepted_tokens == 58000
    assert p.acceptance_length == 1 + 58000 / 38000


def test_the_issue_run_is_refused_not_read_as_one_run(tmp_path):
    """The issue's figures: AL 2.5865 over 38,000 drafts read as one run, where the run after
    the restart was 2.528375 over 40,000."""
    before, after = pair(tmp_path, created=(FIRST, SECOND),
                         before=(0, (2000, 6000, 3000, (1400, 1000, 600))),
                         after=(0, (40000, 120000, 61135, (29000, 19500, 12635))))
    assert {f.code for f in refusal(after, before)} == {"server_restarted"}
    alone = read_vllm_metrics(after, None, FACTS).sets[0].profiles[0]
    assert alone.acceptance_length == 2.528375


def test_check_reads_with_the_same_reader_and_refuses_too(tmp_path):
    before, after = pair(tmp_path, created=(FIRST, SECOND))
    with pytest.raises(InvalidInput) as exc:
        measure_run(after, before, 3)
    assert {f.code for f in exc.value.findings} == {"server_restarted"}


def test_the_cli_exits_1_with_the_times_on_stderr(tmp_path):
    before, after = pair(tmp_path, created=(FIRST, SECOND))
    result = run("ingest", "vllm-metrics", after, "--before", before, "--model", "m",
                 "--method", "eagle3", "--k", "3", "--thinking", "off", "--category",
                 "coding", "--hardware", "b300", "--engine-image", "i", "--temperature", "0")
    assert result.exit_code == 1 and result.stdout == ""
    assert "server restarted" in result.stderr and "1796451479.07" in result.stderr


def test_a_counter_reset_is_still_a_restart_without_start_times(tmp_path):
    before, after = pair(tmp_path, created=(None, None),
                         before=(0, (50000, 150000, 70000, (35000, 22000, 13000))))
    text = Path(before).read_text()
    Path(before).write_text("\n".join(x for x in text.splitlines() if "_created" not in x))
    codes = {f.code for f in refusal(after, before)}
    assert codes == {"scrapes_swapped"} or "counter_went_down" in codes
