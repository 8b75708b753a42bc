"""Every counter source's counts keep the contract's rules for ``counts`` (third round), rounded
or not, so that the files they write validate once counts are rendered and checked: drafts ≥ 1,
accepted ≤ draft tokens ≤ K × drafts, K per-position counts non-increasing, each ≤ drafts,
summing to the accepted tokens, AL within 0.01 of 1 + accepted / drafts and each rate within
0.01 of its count over drafts. The fixtures are the sources' own (their tests cite them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry_db.model import Sampling
from registry_db.sources import get_source
from registry_db.sources.counters.common import Facts

DATA = Path(__file__).resolve().parents[1] / "data" / "sources"
RUNS = [
    ("vllm-metrics", DATA / "vllm" / "after.prom", {"before": str(DATA / "vllm" / "before.prom")}),
    ("vllm-metrics", DATA / "vllm" / "adaptive.prom", {}),
    ("atom-metrics", DATA / "atom" / "after.prom", {"before": str(DATA / "atom" / "before.prom")}),
    ("sglang", DATA / "sglang" / "responses.jsonl", {}),
    ("trtllm-stats", DATA / "trtllm" / "stats.json", {}),
]


@pytest.mark.parametrize("round_to", [None, 2])
@pytest.mark.parametrize("source, path, options", RUNS)
def test_the_counts_keep_the_contracts_rules(source, path, options, round_to):
    facts = Facts(model="m", method="mtp", k=3, thinking="on", category="coding",
                  hardware="b300", engine_image="img:1", sampling=Sampling(temperature=1.0))
    sets, findings = get_source(source).read([path], facts=facts, round_to=round_to, **options)
    assert not [f for f in findings if f.is_error], findings
    (p,) = sets[0].profiles
    c, k = p.counts, p.num_spec_tokens
    assert c is not None and c.drafts >= 1
    assert c.accepted_tokens <= c.draft_tokens <= k * c.drafts
    assert abs(p.acceptance_length - (1 + c.accepted_tokens / c.drafts)) <= 0.01
    if c.accepted_per_position is not None:
        a = c.accepted_per_position
        assert len(a) == k and list(a) == sorted(a, reverse=True) and max(a) <= c.drafts
        assert sum(a) == c.accepted_tokens
        assert p.per_position_rates is not None
        assert all(abs(r - n / c.drafts) <= 0.01 for r, n in zip(p.per_position_rates, a))


COMMANDS = [(source, str(path), ["--before", options["before"]] if options else [])
            for source, path, options in RUNS if path.name != "adaptive.prom"]


@pytest.mark.parametrize("command, path, extra", COMMANDS)
def test_ingest_writes_the_counts_and_the_file_validates(tmp_path, command, path, extra):
    """End to end: the command's file carries `counts`, the validator (counts' rules
    included) accepts it, and reading it back gives the counts the source computed."""
    from registry_db.sources.profile_set import check_paths
    from tests.helpers import run_cli

    out = tmp_path / "run.yaml"
    result = run_cli("ingest", command, path, *extra, "--model", "m", "--method", "mtp", "--k",
                     "3", "--thinking", "on", "--category", "coding", "--hardware", "b300",
                     "--engine-image", "img:1", "--temperature", "1.0", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert "\n  counts:\n    drafts: " in out.read_text()
    sets, findings = check_paths([out])
    assert findings == []
    facts = Facts(model="m", method="mtp", k=3, thinking="on", category="coding",
                  hardware="b300", engine_image="img:1", sampling=Sampling(temperature=1.0))
    options = {"before": extra[1]} if extra else {}
    expected, _ = get_source(command).read([path], facts=facts, **options)
    assert sets[0].profiles[0].counts == expected[0].profiles[0].counts
