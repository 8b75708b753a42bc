"""ATOM's MTP counters become one measured profile with the exact distribution. No database.

The fixtures (tests/data/sources/atom/*.prom) are what ATOM's standalone OpenAI server writes:
ROCm/ATOM ffdf3bb5ddf8a15a64d521a2eeb3bc7438f9ac21, atom/entrypoints/openai/metrics.py
(``_AtomMetricsCollector``: CounterMetricFamily ``atom:mtp_draft_tokens``,
``atom:mtp_accepted_tokens``, ``atom:mtp_decode_steps`` labelled ``accepted_tokens``, and the
gauges ``atom:mtp_acceptance_rate``, ``atom:mtp_average_tokens_per_forward``), rendered by
prometheus_client's ``generate_latest`` from the snapshot ``SpecStats.get_statistics`` returns
(atom/model_engine/scheduler.py). There ``update(num_new_token)`` files a step under
``num_new_token - 1``, the tokens it emitted minus the target's own: ``accepted_tokens="n"``
counts the drafts a step accepted, and ``total_draft_tokens`` grows by K per step.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from registry_db.errors import InvalidInput
from registry_db.model import Counts, Sampling
from registry_db.sources import get_source
from registry_db.sources.counters.atom import read_atom_metrics
from registry_db.sources.counters.common import Facts
from tests.helpers import run_cli as run

DATA = Path(__file__).resolve().parents[1] / "data" / "sources" / "atom"
AFTER, BEFORE = str(DATA / "after.prom"), str(DATA / "before.prom")
FACTS = Facts(model="kimi-k3", method="dspark", k=3, thinking="on", category="coding",
              hardware="mi355x", engine_image="rocm/atom:v1", sampling=Sampling(temperature=1.0))
#: The steps between the scrapes by drafts accepted: 1000 accepted 0, 2500 one, ... (K = 3).
STEPS = (1000, 2500, 4000, 6500)
DRAFTS = sum(STEPS)
ACCEPTED = sum(n * c for n, c in enumerate(STEPS))
AT_LEAST = (2500 + 4000 + 6500, 4000 + 6500, 6500)


def profile(after=AFTER, before=BEFORE, facts=FACTS, **kwargs):
    result = read_atom_metrics(after, before, facts, **kwargs)
    (ps,) = result.sets
    (p,) = ps.profiles
    return p, result


def refused(after=AFTER, before=BEFORE, facts=FACTS, **kwargs) -> list:
    with pytest.raises(InvalidInput) as exc:
        read_atom_metrics(after, before, facts, **kwargs)
    return exc.value.findings


def edited(tmp_path, old: str, new: str, source=AFTER, name="edited.prom") -> str:
    text = Path(source).read_text()
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new))
    return str(path)


def test_al_and_the_rates_are_exact_from_the_distribution():
    p, result = profile()
    assert Fraction(p.acceptance_length) == Fraction(float(1 + Fraction(ACCEPTED, DRAFTS)))
    assert 1 + Fraction(ACCEPTED, DRAFTS) == Fraction(22, 7)
    assert p.per_position_rates == tuple(float(Fraction(a, DRAFTS)) for a in AT_LEAST)
    assert result.warnings == ()


def test_the_counts_are_the_profiles():
    p, _ = profile()
    assert p.counts == Counts(drafts=DRAFTS, draft_tokens=3 * DRAFTS, accepted_tokens=ACCEPTED,
                              accepted_per_position=AT_LEAST)
    assert sum(AT_LEAST) == ACCEPTED
    assert p.counts.uncertainty(3).exact is True


def test_without_before_it_counts_from_the_servers_start():
    p, _ = profile(before=None)
    assert p.counts == Counts(15000, 45000, 32000, (13900, 11200, 6900))
    assert p.provenance.source == f"ATOM /metrics: {AFTER}"


def test_the_source_protocol_and_its_registry_row():
    source = get_source("atom-metrics")
    sets, findings = source.read([AFTER], before=BEFORE, facts=FACTS)
    assert findings == [] and sets[0].profiles[0].counts.drafts == DRAFTS
    sets, findings = source.read([BEFORE], before=BEFORE, facts=FACTS)
    assert sets == [] and [f.code for f in findings] == ["zero_drafts"]


def test_a_gauge_is_never_read_and_the_missing_counter_says_so(tmp_path):
    """Without the steps counter only the gauge atom:mtp_average_tokens_per_forward is left."""
    text = "".join(line for line in Path(AFTER).read_text().splitlines(keepends=True)
                   if "mtp_decode_steps" not in line)
    path = tmp_path / "gauges.prom"
    path.write_text(text)
    findings = refused(after=str(path), before=None)
    assert [f.code for f in findings] == ["missing_counter"]
    assert "atom:mtp_average_tokens_per_forward" in findings[0].message
    assert "not counts" in findings[0].message


def test_a_counter_declared_a_gauge_is_refused(tmp_path):
    after = edited(tmp_path, "# TYPE atom:mtp_decode_steps_total counter",
                   "# TYPE atom:mtp_decode_steps_total gauge")
    (finding,) = refused(after=after, before=None)
    assert finding.code == "not_a_counter" and finding.line == 26
    assert "declared a gauge" in finding.message


def test_a_restart_is_a_counter_that_went_down(tmp_path):
    after = edited(tmp_path, 'accepted_tokens="3"} 6900.0', 'accepted_tokens="3"} 60.0')
    findings = refused(after=after)
    assert [f.code for f in findings] == ["counter_went_down"]
    assert findings[0].line == 30 and "restarted" in findings[0].message


def test_swapped_scrapes_are_named_as_such():
    (finding,) = refused(after=BEFORE, before=AFTER)
    assert finding.code == "scrapes_swapped" and "look swapped" in finding.message


def test_a_missing_step_series_is_missing_not_a_restart(tmp_path):
    text = "".join(line for line in Path(AFTER).read_text().splitlines(keepends=True)
                   if 'accepted_tokens="2"' not in line)
    path = tmp_path / "gap.prom"
    path.write_text(text)
    findings = refused(after=str(path))
    assert [f.code for f in findings] == ["missing_series"]
    assert 'accepted_tokens="2"' in findings[0].message and "BEFORE has it" in findings[0].message


def test_several_servers_are_refused(tmp_path):
    """A federated or queried scrape carries instance/job labels; two servers' sums are not
    one run."""
    samples = [x for x in Path(AFTER).read_text().splitlines() if x.startswith("atom:mtp_")
               and "{" not in x.split(" ")[0] and not x.startswith(("atom:mtp_acceptance",
                                                                     "atom:mtp_average"))]
    steps = [x for x in Path(AFTER).read_text().splitlines()
             if x.startswith("atom:mtp_decode_steps_total{")]

    def server(host: str) -> list[str]:
        return [x.replace(" ", f'{{instance="{host}",job="atom"}} ', 1) for x in samples] + [
            x.replace("{", f'{{instance="{host}",job="atom",', 1) for x in steps]

    path = tmp_path / "federated.prom"
    path.write_text("\n".join(server("a:8000") + server("b:8000")) + "\n")
    findings = refused(after=str(path), before=None)
    assert [f.code for f in findings] == ["mixed_servers"]
    assert "2 servers" in findings[0].message and "b:8000" in findings[0].message


@pytest.mark.parametrize("k, words", [(2, "needs exactly 0..2"), (4, "needs exactly 0..4")])
def test_the_steps_labels_must_be_zero_to_k(k, words):
    findings = refused(facts=Facts(**{**FACTS.__dict__, "k": k}))
    assert [f.code for f in findings] == ["bad_positions"] and words in findings[0].message


def test_steps_that_disagree_with_the_accepted_counter_are_inconsistent(tmp_path):
    after = edited(tmp_path, "atom:mtp_accepted_tokens_total 32000.0",
                   "atom:mtp_accepted_tokens_total 32001.0")
    findings = refused(after=after)
    assert [f.code for f in findings] == ["inconsistent_counters"]


ARGS = ["--model", "kimi-k3", "--method", "dspark", "--k", "3", "--thinking", "on",
        "--category", "coding", "--hardware", "mi355x", "--engine-image", "rocm/atom:v1",
        "--temperature", "1.0"]


def test_cli_writes_a_valid_file(tmp_path):
    from registry_db.sources.profile_set import check_paths

    out = tmp_path / "kimi-k3-dspark.yaml"
    result = run("ingest", "atom-metrics", AFTER, "--before", BEFORE, *ARGS, "-o", str(out))
    assert result.exit_code == 0, result.stderr
    sets, findings = check_paths([out])
    assert findings == [] and sets[0].profiles[0].acceptance_length == float(Fraction(22, 7))


def test_cli_refusals_exit_1_with_file_and_line():
    result = run("ingest", "atom-metrics", BEFORE, "--before", AFTER, *ARGS)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith(f"{BEFORE}:15:1: atom:mtp_draft_tokens: every counter ")


# --- before the exporter's first refresh -------------------------------------------------------

def _unrefreshed_scrape() -> str:
    """What ATOM's /metrics answers before its first refresh: ``_AtomMetricsCollector.collect``
    (ROCm/ATOM 1b2be632623a0dd8d5d105eb82e83d85b5465d3e, atom/entrypoints/openai/metrics.py)
    over the empty snapshot the exporter starts with, its MTP families as it builds them,
    rendered by prometheus_client's ``generate_latest`` as ``AtomMetricsExporter.render`` does."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    class Collector:
        def collect(self):
            snapshot: dict = {}
            metric = GaugeMetricFamily(
                "atom:metrics_snapshot_available",
                "Whether a runtime metrics snapshot has been collected successfully.")
            metric.add_metric([], float(bool(snapshot.get("enabled", False))))
            yield metric
            mtp = snapshot.get("mtp", {})
            for name, doc, value in (
                    ("atom:mtp_draft_tokens", "Number of speculative draft tokens considered.",
                     mtp.get("total_draft_tokens", 0)),
                    ("atom:mtp_accepted_tokens", "Number of accepted speculative bonus tokens.",
                     mtp.get("total_accepted_tokens", 0))):
                metric = CounterMetricFamily(name, doc)
                metric.add_metric([], float(value))
                yield metric
            distribution = CounterMetricFamily(
                "atom:mtp_decode_steps",
                "Number of speculative decode steps by accepted bonus-token count.",
                labels=["accepted_tokens"])
            for accepted, steps in sorted(mtp.get("distribution", {}).items()):
                distribution.add_metric([str(accepted)], float(steps))
            yield distribution

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    return generate_latest(registry).decode("utf-8")


@pytest.mark.parametrize("which", ["after", "before"])
def test_a_scrape_before_the_exporters_first_refresh_says_so(tmp_path, which):
    text = _unrefreshed_scrape()
    assert "atom:metrics_snapshot_available 0.0" in text
    early = tmp_path / "early.prom"
    early.write_text(text)
    after, before = (str(early), BEFORE) if which == "after" else (AFTER, str(early))
    (finding,) = refused(after=after, before=before)
    assert finding.code == "no_snapshot_yet" and finding.file == str(early)
    assert finding.line == 3 and "first runtime snapshot" in finding.message
    assert "with MTP on" not in finding.message
