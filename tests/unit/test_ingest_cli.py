"""`registry ingest` on the command line: the flags the library tests do not reach
(vllm-metrics' --name, sampling, --source, --run, --model-name). No database."""

from __future__ import annotations

from pathlib import Path

from registry_db.sources.profile_set import check_paths
from tests.helpers import run_cli as run

DATA = Path(__file__).resolve().parents[1] / "data" / "sources"
VLLM = DATA / "vllm"
IMAGE = "vllm/vllm-openai:v0.22.0"
FACTS = ["--model", "example-model", "--method", "eagle3", "--k", "3", "--thinking", "off",
         "--category", "coding", "--hardware", "b300", "--engine-image", IMAGE,
         "--temperature", "0.6"]


def test_vllm_flags_reach_the_profile(tmp_path):
    out = tmp_path / "run.yaml"
    result = run("ingest", "vllm-metrics", VLLM / "after-two-models.prom",
                 "--before", VLLM / "before.prom", *FACTS, "--model-name", "example/model",
                 "--top-p", "0.95", "--top-k", "20", "--max-tokens", "4096",
                 "--source", "team benchmark", "--run", "https://ci.example/1",
                 "--name", "team-run", "-o", out)
    assert result.exit_code == 0, result.output
    assert "whose name differs; give --name run" in result.stderr
    (ps,) = check_paths([out])[0]
    assert ps.name == "team-run"
    (p,) = ps.profiles
    pv = p.provenance
    assert (pv.source, pv.run) == ("team benchmark", "https://ci.example/1")
    assert (pv.sampling.temperature, pv.sampling.top_p, pv.sampling.top_k,
            pv.sampling.max_tokens) == (0.6, 0.95, 20, 4096)
    assert dict(pv.settings)["num_drafts"] == 84995  # example/model's counters only
