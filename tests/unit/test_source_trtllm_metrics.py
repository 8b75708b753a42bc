"""TensorRT-LLM's per-position Prometheus counters become one measured profile, exact per
position, and ``check`` tells them from the other sources. No database.

The scrapes are made with prometheus_client the way NVIDIA/TensorRT-LLM
050f80def8df236e326949c8bd9dee10fd896a83 ``tensorrt_llm/metrics/collector.py`` makes them:
``MetricsCollector.__init__`` registers the Counters ``trtllm_spec_decode_drafted_tokens_total``
and ``trtllm_spec_decode_accepted_tokens_total`` with the server's labels plus
``token_position``, and ``trtllm_spec_decode_num_draft_tokens_total`` /
``..._num_accepted_tokens_total`` with the server's labels; ``log_request_metrics_dict``, when a
request finishes, increments position p of each by the request's drafted and accepted tokens
there (up to the last position drafted, skipping zeros), and ``log_iteration_stats`` the
iteration counters by each iteration's ``numDraftTokens`` and ``numAcceptedTokens``.
tests/data/sources/trtllm/before.prom and after.prom were written by :func:`scrape` below
(K = 3: a warm-up of two requests, then the run's three).
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry_db.errors import InvalidInput
from registry_db.model import Sampling
from registry_db.sources import get_source
from registry_db.sources.counters.common import Facts
from registry_db.sources.counters.detect import detect
from registry_db.sources.counters.trtllm import read_trtllm_stats
from registry_db.sources.counters.trtllm_metrics import measure, read_trtllm_metrics
from tests.helpers import run_cli as run

DATA = Path(__file__).resolve().parents[1] / "data" / "sources" / "trtllm"
K = 3
LABELS = {"model_name": "deepseek-v4", "engine_type": "trtllm"}
FACTS = Facts(model="deepseek-v4", method="mtp", k=K, thinking="on", category="coding",
              hardware="gb300", engine_image="nvcr.io/nvidia/tensorrt-llm/release:1.3",
              sampling=Sampling(temperature=1.0))
#: Each request's steps: the drafts each step accepted (every step drafts K).
WARM_UP = [[1, 0, 3], [2, 2]]
RUN = [[3, 1, 0, 2], [3, 3, 1], [0, 2, 2, 3]]


class Server:
    """The collector's counters on their own registry, fed as the collector feeds them."""

    def __init__(self, labels: dict[str, str] = LABELS) -> None:
        from prometheus_client import CollectorRegistry, Counter

        self.registry = CollectorRegistry()
        self.labels = labels
        with_pos = {**labels, "token_position": ""}
        self.drafted = Counter(name="trtllm_spec_decode_drafted_tokens_total",
                               documentation="Total drafted tokens per speculative decoding "
                                             "position.",
                               labelnames=with_pos.keys(), registry=self.registry)
        self.accepted = Counter(name="trtllm_spec_decode_accepted_tokens_total",
                                documentation="Total accepted tokens per speculative decoding "
                                              "position.",
                                labelnames=with_pos.keys(), registry=self.registry)
        self.iter_drafted = Counter(name="trtllm_spec_decode_num_draft_tokens_total",
                                    documentation="Total number of draft tokens in speculative "
                                                  "decoding",
                                    labelnames=labels.keys(), registry=self.registry)
        self.iter_accepted = Counter(name="trtllm_spec_decode_num_accepted_tokens_total",
                                     documentation="Total number of accepted tokens in "
                                                   "speculative decoding",
                                     labelnames=labels.keys(), registry=self.registry)

    def step(self, accepted: int, drafted: int = K) -> None:
        """One iteration of one request, as log_iteration_stats counts it."""
        if drafted > 0:
            self.iter_drafted.labels(**self.labels).inc(drafted)
        if accepted > 0:
            self.iter_accepted.labels(**self.labels).inc(accepted)

    def finish(self, steps: list[int], drafted: int = K) -> None:
        """A request's end, as log_request_metrics_dict counts it."""
        per_pos_drafted = [len(steps) if p < drafted else 0 for p in range(drafted)]
        per_pos_accepted = [sum(1 for n in steps if n > p) for p in range(drafted)]
        last = max((p for p, n in enumerate(per_pos_drafted) if n > 0), default=-1)
        for pos in range(last + 1):
            labels = {**self.labels, "token_position": pos}
            if per_pos_drafted[pos] > 0:
                self.drafted.labels(**labels).inc(per_pos_drafted[pos])
            if per_pos_accepted[pos] > 0:
                self.accepted.labels(**labels).inc(per_pos_accepted[pos])

    def run(self, requests: list[list[int]], drafted: int = K) -> None:
        for steps in requests:
            for n in steps:
                self.step(n, drafted)
            self.finish(steps, drafted)

    def scrape(self, path: Path) -> str:
        from prometheus_client import generate_latest

        path.write_bytes(generate_latest(self.registry))
        return str(path)


def scrape(tmp_path: Path, warm_up=WARM_UP, requests=RUN) -> tuple[str, str]:
    server = Server()
    server.run(warm_up)
    before = server.scrape(tmp_path / "before.prom")
    server.run(requests)
    return before, server.scrape(tmp_path / "after.prom")


def exact(requests: list[list[int]], k: int = K) -> tuple[Fraction, tuple[Fraction, ...]]:
    """AL and the rates from the raw steps, computed without the reader."""
    steps = [n for r in requests for n in r]
    return (1 + Fraction(sum(steps), len(steps)),
            tuple(Fraction(sum(1 for n in steps if n >= i), len(steps)) for i in range(1, k + 1)))


def test_al_and_the_rates_are_exact(tmp_path):
    before, after = scrape(tmp_path)
    result = read_trtllm_metrics(after, before, FACTS)
    (p,) = result.sets[0].profiles
    al, rates = exact(RUN)
    assert Fraction(p.acceptance_length) == Fraction(float(al))
    assert p.per_position_rates == tuple(float(r) for r in rates)
    steps = [n for r in RUN for n in r]
    assert (p.counts.drafts, p.counts.draft_tokens, p.counts.accepted_tokens) == (
        len(steps), K * len(steps), sum(steps))
    assert p.counts.uncertainty(K).exact and result.warnings == ()


def test_the_fixtures_are_the_collectors_text_and_read_alike():
    m = measure(str(DATA / "after.prom"), str(DATA / "before.prom"), K)
    assert 1 + m.tally.accepted / m.tally.drafts == exact(RUN)[0]
    assert "trtllm_spec_decode_drafted_tokens_total{" in (DATA / "after.prom").read_text()


def test_check_tells_the_prometheus_counters_from_the_iteration_stats(tmp_path):
    _, after = scrape(tmp_path)
    assert detect(after, Path(after).read_text()) == "trtllm-metrics"
    stats = DATA / "stats.json"
    assert detect(str(stats), stats.read_text()) == "trtllm"


def test_trtllm_stats_given_them_names_the_command_that_reads_them(tmp_path):
    _, after = scrape(tmp_path)
    with pytest.raises(InvalidInput) as exc:
        read_trtllm_stats(after, FACTS)
    (finding,) = exc.value.findings
    assert finding.code == "not_a_count"
    assert "registry ingest trtllm-metrics" in finding.message
    assert "no count of the requests" not in finding.message.split(";")[0]


def test_the_source_protocol_and_its_registry_row(tmp_path):
    before, after = scrape(tmp_path)
    sets, findings = get_source("trtllm-metrics").read([after], facts=FACTS, before=before)
    assert findings == [] and sets[0].profiles[0].counts.drafts == sum(len(r) for r in RUN)


def test_a_position_past_k_means_another_k(tmp_path):
    before, after = scrape(tmp_path)
    with pytest.raises(InvalidInput) as exc:
        measure(after, before, 2)
    assert [f.code for f in exc.value.findings] == ["bad_positions"]


def test_a_request_in_flight_at_a_scrape_warns(tmp_path):
    server = Server()
    server.run(WARM_UP)
    for n in (2, 1):  # a request's first steps, before the BEFORE scrape
        server.step(n)
    before = server.scrape(tmp_path / "before.prom")
    server.run(RUN)
    server.finish([2, 1, 3])  # ... and its end, with every step, after it
    after = server.scrape(tmp_path / "after.prom")
    m = measure(after, before, K)
    assert [w.code for w in m.warnings] == ["requests_in_flight", "requests_in_flight"]


def test_a_restart_between_the_scrapes_is_refused(tmp_path):
    _, after = scrape(tmp_path)
    fresh = Server()
    fresh.run([[1, 1]])
    restarted = fresh.scrape(tmp_path / "restarted.prom")
    with pytest.raises(InvalidInput) as exc:
        measure(restarted, after, K)
    codes = {f.code for f in exc.value.findings}
    assert codes & {"counter_went_down", "scrapes_swapped"}, codes


def test_older_releases_without_the_counters_name_the_reader_that_works(tmp_path):
    from prometheus_client import CollectorRegistry, Counter, generate_latest

    registry = CollectorRegistry()
    Counter("trtllm_spec_decode_num_draft_tokens_total", "d", ["model_name"],
            registry=registry).labels(model_name="m").inc(30)
    path = tmp_path / "old.prom"
    path.write_bytes(generate_latest(registry))
    with pytest.raises(InvalidInput) as exc:
        measure(str(path), None, K)
    (finding,) = exc.value.findings
    assert finding.code == "missing_counter" and "ingest trtllm-stats" in finding.message


def test_cli_writes_a_valid_file(tmp_path):
    from registry_db.sources.profile_set import check_paths

    before, after = scrape(tmp_path)
    out = tmp_path / "deepseek-v4-mtp.yaml"
    result = run("ingest", "trtllm-metrics", after, "--before", before, "--model", "deepseek-v4",
                 "--method", "mtp", "--k", "3", "--thinking", "on", "--category", "coding",
                 "--hardware", "gb300", "--engine-image", "nvcr.io/nvidia/tensorrt-llm/release:1.3",
                 "--temperature", "1.0", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    sets, findings = check_paths([out])
    assert findings == [] and sets[0].profiles[0].per_position_rates is not None


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(k=st.integers(1, 6), data=st.data())
def test_differential_against_the_raw_steps(tmp_path_factory, k, data):
    requests = data.draw(st.lists(st.lists(st.integers(0, k), min_size=1, max_size=6),
                                  min_size=1, max_size=5))
    warm = data.draw(st.lists(st.lists(st.integers(0, k), min_size=1, max_size=4),
                              max_size=3))
    folder = tmp_path_factory.mktemp("prom")
    server = Server()
    server.run(warm, k)
    before = server.scrape(folder / "before.prom")
    server.run(requests, k)
    m = measure(server.scrape(folder / "after.prom"), before, k)
    al, rates = exact(requests, k)
    assert 1 + m.tally.accepted / m.tally.drafts == al
    assert tuple(a / m.tally.drafts for a in m.tally.per_position or ()) == rates
    assert m.warnings == ()
