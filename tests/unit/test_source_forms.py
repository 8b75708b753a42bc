"""An input given to the wrong reader is refused naming the form it is and the command that
reads it. Inputs are built with each producer's own code or field names (tests.helpers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from registry_db.errors import InvalidInput
from registry_db.model import Sampling
from registry_db.sources.counters.atom import read_atom_metrics
from registry_db.sources.counters.common import Facts
from registry_db.sources.counters.detect import measure_run
from registry_db.sources.counters.vllm import read_vllm_metrics
from tests.helpers import vllm_bench_result, vllm_log_line, vllm_scrape

ATOM = Path(__file__).resolve().parents[1] / "data" / "sources" / "atom" / "after.prom"
FACTS = Facts(model="m", method="mtp", k=3, thinking="on", category="coding", hardware="b300",
              engine_image="i", sampling=Sampling(temperature=1.0))


def ray_scrape() -> str:
    """vLLM's counters as Ray Serve's metrics agent exports them: the names sanitised
    (``vllm:`` as ``vllm_``) and prefixed ``ray_``, with Ray's per-replica labels, rendered by
    prometheus_client (the form the issue reports as ``ray_vllm_spec_decode_*``)."""
    import prometheus_client as pc

    registry = pc.CollectorRegistry()
    for name in ("drafts", "draft_tokens", "accepted_tokens"):
        c = pc.Counter(f"ray_vllm_spec_decode_num_{name}", "x", registry=registry,
                       labelnames=["ReplicaId", "model_name", "engine"])
        c.labels("r1", "m", "0").inc(10)
    return pc.generate_latest(registry).decode()


def one(call) -> str:
    with pytest.raises(InvalidInput) as exc:
        call()
    (finding,) = exc.value.findings
    assert finding.code == "another_form"
    return finding.message


@pytest.mark.parametrize("text, words", [
    (vllm_log_line(420, 900, 300, (200, 130, 90)) + "\n", "`registry ingest vllm-log`"),
    (json.dumps(vllm_bench_result((0, 0, 0, (0, 0, 0)), (100, 300, 150, (70, 50, 30)))),
     "`registry ingest vllm-bench`"),
    (ATOM.read_text(), "`registry ingest atom-metrics`"),
    (ray_scrape(), "Ray Serve re-exports"),
])
def test_vllm_metrics_names_the_form_it_was_given(tmp_path, text, words):
    path = tmp_path / "input"
    path.write_text(text)
    message = one(lambda: read_vllm_metrics(str(path), None, FACTS))
    assert words in message and message.startswith("this is ")


def test_atom_metrics_given_a_vllm_scrape_names_vllm_metrics(tmp_path):
    path = tmp_path / "v.prom"
    path.write_text(vllm_scrape({0: (10, 30, 15, (7, 5, 3))}))
    message = one(lambda: read_atom_metrics(str(path), None, FACTS))
    assert "`registry ingest vllm-metrics`" in message


def test_check_given_rays_export_says_so(tmp_path):
    path = tmp_path / "ray.prom"
    path.write_text(ray_scrape())
    message = one(lambda: measure_run(str(path), None, 3))
    assert "Ray" in message and "own /metrics" in message


def test_a_scrape_of_the_right_form_still_reads(tmp_path):
    path = tmp_path / "v.prom"
    path.write_text(vllm_scrape({0: (10, 30, 15, (7, 5, 3))}))
    assert read_vllm_metrics(str(path), None, FACTS).sets[0].profiles[0].acceptance_length == 2.5


LOG = vllm_log_line(420, 900, 300, (200, 130, 90)) + "\n"
SCRAPE = vllm_scrape({0: (10, 30, 15, (7, 5, 3))})


# SGLang's and TensorRT-LLM's readers name Prometheus text themselves (their own messages).
@pytest.mark.parametrize("command, text, words", [
    ("sglang", LOG, "`registry ingest vllm-log`"),
    ("trtllm-stats", LOG, "`registry ingest vllm-log`"),
    ("vllm-bench", LOG, "`registry ingest vllm-log`"),
    ("vllm-bench", SCRAPE, "`registry ingest vllm-metrics`"),
])
def test_a_json_reader_given_a_log_or_a_scrape_names_it(tmp_path, command, text, words):
    from tests.helpers import run_cli

    path = tmp_path / "input"
    path.write_text(text)
    result = run_cli("ingest", command, str(path), "--model", "m", "--method", "mtp", "--k",
                     "3", "--thinking", "on", "--category", "coding", "--hardware", "b300",
                     "--engine-image", "i", "--temperature", "1")
    assert result.exit_code == 1 and words in result.stderr, result.stderr
    assert "not JSON: this is " in result.stderr
