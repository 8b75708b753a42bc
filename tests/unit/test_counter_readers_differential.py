"""Each reader this module covers against an independent computation from the raw step
outcomes: random runs (engines, K, how many steps accepted n drafts), rendered by the
producer's own code or format (tests.helpers: prometheus_client for vLLM and ATOM, vLLM's
bench arithmetic and log format), read, and compared exactly with AL = 1 + Σ n·c_n / Σ c_n and
p_i = Σ_{n > i} c_n / Σ c_n computed here from the step counts c_n."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry_db.model import Sampling
from registry_db.sources.counters.atom import read_atom_metrics
from registry_db.sources.counters.common import Facts
from registry_db.sources.counters.vllm import read_vllm_metrics
from registry_db.sources.counters.vllm_bench import read_vllm_bench
from registry_db.sources.counters.vllm_log import read_vllm_log
from tests.helpers import atom_scrape, vllm_bench_result, vllm_log_line, vllm_scrape

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def facts(k: int) -> Facts:
    return Facts(model="m", method="mtp", k=k, thinking="on", category="coding",
                 hardware="b300", engine_image="i", sampling=Sampling(temperature=1.0))


@st.composite
def runs(draw, engines_max: int = 3, most: int = 5000):
    """K, then per engine the step counts c_n (n = 0..K) before and during the run."""
    k = draw(st.integers(1, 6))
    engines = draw(st.integers(1, engines_max))
    dist = st.lists(st.integers(0, most), min_size=k + 1, max_size=k + 1)
    before = [tuple(draw(dist)) for _ in range(engines)]
    during = [tuple(draw(dist)) for _ in range(engines)]
    if sum(sum(c) for c in during) == 0:
        during[0] = (0,) * k + (1,)
    return k, before, during


def counters(steps: tuple[int, ...]) -> tuple[int, int, int, tuple[int, ...]]:
    """vLLM's counters for these steps (SpecDecodingStats.observe_draft, step by step)."""
    k = len(steps) - 1
    drafts = sum(steps)
    accepted = sum(n * c for n, c in enumerate(steps))
    per_pos = tuple(sum(steps[i + 1:]) for i in range(k))
    return drafts, k * drafts, accepted, per_pos


def plus(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], tuple(x + y for x, y in zip(a[3], b[3])))


def expected(k: int, during: list[tuple[int, ...]]) -> tuple[float, tuple[float, ...]]:
    total = [sum(c[n] for c in during) for n in range(k + 1)]
    d = sum(total)
    al = 1 + Fraction(sum(n * c for n, c in enumerate(total)), d)
    rates = tuple(float(Fraction(sum(total[i + 1:]), d)) for i in range(k))
    return float(al), rates


_names = itertools.count()


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return Path(tmp_path_factory.mktemp("differential"))


def write(folder: Path, text: str, name: str) -> str:
    path = folder / f"{next(_names)}-{name}"  # each example its own files
    path.write_text(text)
    return str(path)


@SETTINGS
@given(runs(), st.booleans())
def test_vllm_metrics_matches_the_steps(folder, run, openmetrics):
    k, before, during = run
    start = {i: counters(c) for i, c in enumerate(before)}
    end = {i: plus(start[i], counters(during[i])) for i in start}
    b = write(folder, vllm_scrape(start, created=1.7e9, openmetrics=openmetrics), "b.prom")
    a = write(folder, vllm_scrape(end, created=1.7e9, openmetrics=openmetrics), "a.prom")
    (p,) = read_vllm_metrics(a, b, facts(k)).sets[0].profiles
    assert (p.acceptance_length, p.per_position_rates) == expected(k, during)


@SETTINGS
@given(runs(engines_max=1))
def test_atom_metrics_matches_the_steps(folder, run):
    k, (before,), (during,) = run
    end = tuple(x + y for x, y in zip(before, during))
    b, a = write(folder, atom_scrape(before), "b.prom"), write(folder, atom_scrape(end), "a.prom")
    (p,) = read_atom_metrics(a, b, facts(k)).sets[0].profiles
    assert (p.acceptance_length, p.per_position_rates) == expected(k, [during])


@SETTINGS
@given(runs())
def test_vllm_bench_matches_the_steps(folder, run):
    k, before, during = run
    start = counters(tuple(map(sum, zip(*before))))
    end = plus(start, counters(tuple(map(sum, zip(*during)))))
    path = write(folder, json.dumps(vllm_bench_result(start, end)), "run.json")
    (p,) = read_vllm_bench(path, facts(k)).sets[0].profiles
    assert (p.acceptance_length, p.per_position_rates) == expected(k, during)


@SETTINGS
@given(runs(most=300))
def test_vllm_log_matches_the_steps(folder, run):
    """Each engine's steps of the run are one logging interval (every step drafts K)."""
    k, _, during = run
    lines = [vllm_log_line(acc, tokens, drafts, per_pos)
             for drafts, tokens, acc, per_pos in map(counters, during) if drafts]
    result = read_vllm_log(write(folder, "\n".join(lines) + "\n", "server.log"), facts(k))
    (p,) = result.sets[0].profiles
    al, rates = expected(k, during)
    assert p.acceptance_length == al
    if p.per_position_rates is not None:
        assert p.per_position_rates == rates
    else:
        assert "rates_not_counts" in [w.code for w in result.warnings]
