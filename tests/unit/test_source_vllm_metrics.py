"""vLLM's /metrics counters become one measured profile: the arithmetic, the checks, no database."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from registry_db.errors import InvalidInput
from registry_db.model import Sampling
from registry_db.sources.counters.vllm import Facts, read_vllm_metrics, round_rates
from registry_db.sources.profile_set import check_paths
from tests.helpers import run_cli as run

DATA = Path(__file__).resolve().parents[1] / "data" / "sources" / "vllm"
AFTER, BEFORE = str(DATA / "after.prom"), str(DATA / "before.prom")
FACTS = Facts(model="example-model", method="eagle3", k=3, thinking="off", category="coding",
              hardware="b300", engine_image="vllm/vllm-openai:v0.22.0",
              sampling=Sampling(temperature=0.6, top_p=0.95))
#: The deltas in the fixtures, summed over engines 0 and 1 (the issue's example numbers).
DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POS = 84995, 254985, 128899, (61234, 40000, 27665)


def profile(after=AFTER, before=BEFORE, facts=FACTS, **kwargs):
    result = read_vllm_metrics(after, before, facts, **kwargs)
    (ps,) = result.sets
    (p,) = ps.profiles
    return p, result


def refused(after=AFTER, before=BEFORE, facts=FACTS, **kwargs) -> list:
    with pytest.raises(InvalidInput) as exc:
        read_vllm_metrics(after, before, facts, **kwargs)
    return exc.value.findings


def edited(tmp_path, drop: str = "", replace: tuple[str, str] = ("", ""), source=AFTER) -> str:
    """A copy of a scrape without the lines holding ``drop``, or with one text replaced."""
    lines = Path(source).read_text().splitlines(keepends=True)
    text = "".join(line for line in lines if not (drop and drop in line))
    if replace[0]:
        text = text.replace(*replace)
    path = tmp_path / "edited.prom"
    path.write_text(text)
    return str(path)



# --- the arithmetic --------------------------------------------------------------------------

def test_al_and_rates_are_vllms_definitions_exact_and_unrounded():
    p, result = profile()
    assert p.acceptance_length == float(1 + Fraction(ACCEPTED, DRAFTS)) == 2.5165480322371905
    assert p.per_position_rates == tuple(float(Fraction(n, DRAFTS)) for n in PER_POS)
    assert (p.method, p.num_spec_tokens, p.thinking, p.category) == (
        "measured", 3, "off", "coding")
    assert result.warnings == ()  # draft tokens are exactly K x drafts here


def test_counts_are_summed_over_engines_and_recorded_in_settings():
    p, _ = profile()
    assert dict(p.provenance.settings) == {"num_drafts": DRAFTS, "num_draft_tokens": DRAFT_TOKENS,
                                           "num_accepted_tokens": ACCEPTED}


def test_without_before_the_counters_count_from_the_servers_start():
    p, _ = profile(before=None)
    assert dict(p.provenance.settings)["num_drafts"] == 41000 + 46995
    assert p.acceptance_length == float(1 + Fraction(61500 + 71399, 41000 + 46995))
    assert p.provenance.source == f"vLLM /metrics: {AFTER}"


def test_provenance_takes_the_flags_and_prompts():
    facts = Facts(**{**FACTS.__dict__, "source": "team run", "run": "https://ci/1",
                     "benchmark": "SPEED-Bench", "prompts": 80})
    pv = profile(facts=facts)[0].provenance
    assert (pv.source, pv.run, pv.benchmark, pv.prompts, pv.hardware, pv.engine_image) == (
        "team run", "https://ci/1", "SPEED-Bench", 80, "b300", "vllm/vllm-openai:v0.22.0")
    assert (pv.sampling.temperature, pv.sampling.top_p) == (0.6, 0.95)


def test_round_keeps_the_rates_summing_to_al_minus_one():
    p, _ = profile(round_to=2)
    assert p.acceptance_length == 2.52
    assert abs(sum(p.per_position_rates) - (p.acceptance_length - 1)) <= 0.01
    assert p.per_position_rates == (0.72, 0.47, 0.33)


def test_round_distributes_by_largest_remainder_where_rounding_each_rate_would_not():
    # K = 8, every rate 0.45: rounding each to 0.1 misses AL - 1 = 3.6 by 0.4
    rates = [Fraction(9, 20)] * 8
    al = 1 + sum(rates)
    assert abs(sum(round(float(r), 1) for r in rates) - 3.6) > 0.01
    al_r, rounded = round_rates(al, rates, 1)
    assert al_r == 4.6
    assert rounded == (0.5, 0.5, 0.5, 0.5, 0.4, 0.4, 0.4, 0.4)
    assert abs(sum(rounded) - 3.6) < 1e-9


# --- model names -------------------------------------------------------------------------------

def test_several_served_models_need_model_name():
    (finding,) = refused(after=str(DATA / "after-two-models.prom"))
    assert finding.code == "several_models" and "--model-name" in finding.message


def test_model_name_picks_one_served_model():
    two = str(DATA / "after-two-models.prom")
    picked, _ = profile(after=two, model_name="example/model")
    only, _ = profile()
    assert (picked.acceptance_length, picked.per_position_rates) == (
        only.acceptance_length, only.per_position_rates)
    other, _ = profile(after=two, before=None, model_name="other/model")
    assert other.acceptance_length == float(1 + Fraction(900, 500))
    (finding,) = refused(after=two, model_name="nope/model")
    assert finding.code == "unknown_model_name" and "example/model" in finding.message


# --- the checks --------------------------------------------------------------------------------

@pytest.mark.parametrize("counter", ["num_drafts_total", "num_draft_tokens_total",
                                     "num_accepted_tokens_total", "accepted_tokens_per_pos_total"])
def test_a_missing_counter_is_an_error_naming_it(tmp_path, counter):
    findings = refused(after=edited(tmp_path, drop=counter))
    assert {x.code for x in findings} == {"missing_counter"}
    assert counter.replace("_total", "") in findings[0].path


def test_a_counter_that_went_down_is_a_restart():
    findings = refused(after=str(DATA / "after-restart.prom"))
    assert {x.code for x in findings} == {"counter_went_down"}
    assert findings[0].line == 7  # engine 1's drafts line in AFTER
    assert "restarted between the scrapes" in findings[0].message


def test_zero_drafts_is_an_error():
    (finding,) = refused(after=BEFORE)
    assert finding.code == "zero_drafts"


@pytest.mark.parametrize("k", [2, 4])
def test_positions_must_be_exactly_zero_to_k_minus_one(k):
    findings = refused(facts=Facts(**{**FACTS.__dict__, "k": k}))
    assert [x.code for x in findings] == ["bad_positions"]
    assert "0, 1, 2" in findings[0].message


def test_adaptive_verification_warns_and_keeps_al():
    p, result = profile(after=str(DATA / "adaptive.prom"), before=None,
                        facts=Facts(**{**FACTS.__dict__, "method": "dspark"}))
    assert p.acceptance_length == 2.5  # 1 + 15000 / 10000
    (warning,) = result.warnings
    assert warning.code == "draft_tokens_not_k_drafts" and warning.severity == "warning"
    assert "0.625" in warning.message and "0.5" in warning.message  # logged rate vs (AL-1)/K
    settings = dict(p.provenance.settings)
    assert (settings["num_drafts"], settings["num_draft_tokens"]) == (10000, 24000)


def test_text_that_is_not_prometheus_format_is_an_error(tmp_path):
    path = tmp_path / "x.prom"
    path.write_text("this is { not metrics\n")
    (finding,) = refused(after=str(path), before=None)
    assert finding.code == "not_prometheus_text"


def test_a_series_written_twice_is_an_error(tmp_path):
    text = Path(AFTER).read_text()
    line = next(x for x in text.splitlines() if x.startswith("vllm:spec_decode_num_drafts_total"))
    path = tmp_path / "twice.prom"
    path.write_text(text + line + "\n")
    (finding,) = refused(after=str(path), before=None)
    assert "appears twice" in finding.message


def test_per_position_counts_that_disagree_with_accepted_are_inconsistent(tmp_path):
    after = edited(tmp_path, replace=('position="2"} 12300.0', 'position="2"} 2300.0'))
    findings = refused(after=after)
    assert {x.code for x in findings} == {"inconsistent_counters"}


# --- the command line and the output -----------------------------------------------------------

ARGS = ["--model", "example-model", "--method", "eagle3", "--k", "3", "--thinking", "off",
        "--category", "coding", "--hardware", "b300", "--engine-image",
        "vllm/vllm-openai:v0.22.0", "--temperature", "0.6"]


def test_cli_writes_a_valid_file_named_after_its_set_and_the_same_bytes_twice(tmp_path):
    out = tmp_path / "example-model-eagle3.yaml"
    first = run("ingest", "vllm-metrics", AFTER, "--before", BEFORE, *ARGS, "-o", str(out))
    assert first.exit_code == 0, first.output
    text = out.read_text()
    assert "name: example-model-eagle3\n" in text
    sets, findings = check_paths([out])
    assert findings == [] and sets[0].profiles[0].acceptance_length == 2.5165480322371905
    run("ingest", "vllm-metrics", AFTER, "--before", BEFORE, *ARGS, "-o", str(out))
    assert out.read_text() == text


def test_cli_refusals_exit_1_without_traceback_and_usage_errors_exit_2():
    bad = run("ingest", "vllm-metrics", str(DATA / "after-restart.prom"), "--before", BEFORE,
              *ARGS)
    assert bad.exit_code == 1 and "went down" in bad.stderr and bad.stdout == ""
    missing = run("ingest", "vllm-metrics", AFTER, "--model", "m")
    assert missing.exit_code == 2
    negative = run("ingest", "vllm-metrics", AFTER, *ARGS[:-2], "--temperature", "-1")
    assert negative.exit_code == 2


def test_cli_warns_on_stderr_and_still_writes():
    result = run("ingest", "vllm-metrics", str(DATA / "adaptive.prom"), *ARGS, "--round", "3")
    assert result.exit_code == 0
    assert "adaptive verification" in result.stderr
    assert "acceptance_length: 2.5\n" in result.stdout


def test_the_source_protocols_read_returns_refusals_as_findings():
    from registry_db.sources import get_source

    source = get_source("vllm-metrics")
    sets, findings = source.read([AFTER], before=BEFORE, facts=FACTS)
    assert sets[0].profiles[0].acceptance_length == 2.5165480322371905 and findings == []
    sets, findings = source.read([BEFORE], before=BEFORE, facts=FACTS)
    assert sets == [] and [x.code for x in findings] == ["zero_drafts"]


# --- what real scrapes also hold ------------------------------------------------------------

def scrape(tmp_path, drafts, tokens, accepted, per_pos, extra: str = "", name="s.prom") -> str:
    """A one-engine scrape with ``_total`` names (as vLLM writes them)."""
    pre = "vllm:spec_decode_num_"
    lines = [f"{pre}drafts_total {drafts}", f"{pre}draft_tokens_total {tokens}",
             f"{pre}accepted_tokens_total {accepted}"]
    lines += [f'{pre}accepted_tokens_per_pos_total{{position="{i}"}} {n}'
              for i, n in enumerate(per_pos)]
    path = tmp_path / name
    path.write_text(extra + "\n".join(lines) + "\n")
    return str(path)


def test_created_samples_and_other_metrics_are_ignored_and_bare_names_read(tmp_path):
    extra = ("vllm:spec_decode_num_drafts_created 1.7e9\n"
             "vllm:generation_tokens_total 123456.0\n")
    text = Path(scrape(tmp_path, 10, 30, 15, (7, 5, 3), extra)).read_text()
    path = tmp_path / "bare.prom"
    path.write_text(text.replace("_total", "").replace("vllm:generation_tokens",
                                                       "vllm:generation_tokens_total"))
    p, _ = profile(after=str(path), before=None)
    assert p.acceptance_length == 2.5 and p.per_position_rates == (0.7, 0.5, 0.3)


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-3"])
def test_a_counter_that_is_not_a_finite_count_is_refused(tmp_path, value):
    (finding,) = refused(after=scrape(tmp_path, value, 30, 15, (7, 5, 3)), before=None)
    assert finding.code == "not_prometheus_text" and "finite count" in finding.message


@pytest.mark.parametrize("drafts, accepted, per_pos, words", [
    (10, 50, (20, 20, 10), "exceeds K + 1"),
    (10, 25, (11, 9, 5), "more often than there were drafts"),
    (10, 15, (5, 7, 3), "rise with the position"),
])
def test_counts_that_no_vllm_writes_are_inconsistent(tmp_path, drafts, accepted, per_pos, words):
    findings = refused(after=scrape(tmp_path, drafts, 3 * drafts, accepted, per_pos), before=None)
    assert {x.code for x in findings} == {"inconsistent_counters"}
    assert any(words in x.message for x in findings)


def test_a_counter_missing_from_before_is_an_error_too(tmp_path):
    before = scrape(tmp_path, 1, 3, 1, (1, 0, 0), name="before.prom")
    text = Path(before).read_text()
    Path(before).write_text("\n".join(x for x in text.splitlines() if "draft_tokens" not in x))
    findings = refused(after=scrape(tmp_path, 10, 30, 15, (7, 5, 3)), before=before)
    assert [(x.file, x.code) for x in findings] == [(before, "missing_counter")]


def test_an_engine_that_started_between_the_scrapes_counts_from_zero(tmp_path):
    before = scrape(tmp_path, 1, 3, 1, (1, 0, 0), name="before.prom")
    after = Path(scrape(tmp_path, 11, 33, 16, (8, 5, 3))).read_text()
    new_engine = "\n".join(line.replace(" ", '{engine="1"} ', 1) if "{" not in line else
                           line.replace("{", '{engine="1",', 1)
                           for line in after.splitlines())
    path = tmp_path / "after2.prom"
    path.write_text(after + new_engine + "\n")
    p, _ = profile(after=str(path), before=before)
    # engine 0: 10 drafts, 15 accepted since BEFORE; engine 1: 11 and 16 from its start
    assert dict(p.provenance.settings)["num_drafts"] == 21
    assert p.acceptance_length == float(1 + Fraction(31, 21))


# --- the gaps a real scrape meets (issue 25) and hostile scrapes (issue 27, items 14 and 15) ---

def test_an_openmetrics_scrape_reads_as_the_text_one():
    """after.openmetrics is after.prom's counters rendered by prometheus_client's OpenMetrics
    exposition (prometheus_client 0.26, openmetrics/exposition.py), which vLLM's /metrics
    negotiates for a Prometheus that asks for it: samples named vllm_spec_decode_*_total (the
    ``vllm:`` escaped), # TYPE lines keeping ``vllm:``, _created samples, and # EOF."""
    text = (DATA / "after.openmetrics").read_text()
    assert "\nvllm_spec_decode_num_drafts_total{" in text and text.endswith("# EOF\n")
    om, _ = profile(after=str(DATA / "after.openmetrics"))
    plain, _ = profile()
    assert (om.acceptance_length, om.per_position_rates, om.counts) == (
        plain.acceptance_length, plain.per_position_rates, plain.counts)


def test_the_counts_are_the_profiles():
    from registry_db.model import Counts

    p, _ = profile()
    assert p.counts == Counts(DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POS)


def test_several_servers_summed_warn(tmp_path):
    text = Path(AFTER).read_text()
    two = "".join(line.replace('{engine="', '{instance="a:8000",job="vllm",engine="')
                  for line in text.splitlines(keepends=True)) + "".join(
        line.replace('{engine="', '{instance="b:8000",job="vllm",engine="')
        for line in text.splitlines(keepends=True) if line.startswith("vllm:spec"))
    path = tmp_path / "federated.prom"
    path.write_text(two)
    p, result = profile(after=str(path), before=None)
    (warning,) = result.warnings
    assert (warning.code, warning.severity) == ("mixed_servers", "warning")
    assert "2 servers" in warning.message and "instance='b:8000'" in warning.message
    assert p.counts.drafts == 2 * (41000 + 46995)


def test_swapped_scrapes_are_named_as_such():
    (finding,) = refused(after=BEFORE, before=AFTER)
    assert finding.code == "scrapes_swapped" and finding.file == BEFORE
    assert "AFTER and BEFORE look swapped" in finding.message


def test_a_missing_per_position_series_is_missing_not_a_restart(tmp_path):
    after = edited(tmp_path, drop='engine="1",model_name="example/model",position="2"')
    (finding,) = refused(after=after)
    assert finding.code == "missing_series" and "BEFORE has it" in finding.message
    assert 'position="2"' in finding.message and "restart" not in finding.message
    assert f"{BEFORE}:23" in finding.message


def test_a_counter_declared_a_gauge_is_refused(tmp_path):
    after = edited(tmp_path, replace=("# TYPE vllm:spec_decode_num_drafts_total counter",
                                      "# TYPE vllm:spec_decode_num_drafts gauge"))
    text = Path(after).read_text().replace("vllm:spec_decode_num_drafts_total{",
                                           "vllm:spec_decode_num_drafts{")
    Path(after).write_text(text)
    (finding,) = refused(after=after, before=None)
    assert (finding.code, finding.line) == ("not_a_counter", 5)
    assert "declared a gauge" in finding.message


def test_a_scrape_over_the_size_cap_is_refused(tmp_path, monkeypatch):
    from registry_db.sources.counters import common as counters

    monkeypatch.setattr(counters, "MAX_INPUT_BYTES", 1000)
    (finding,) = refused(before=None)
    assert finding.code == "too_large" and "more than 1,000 bytes" in finding.message


def test_k_is_checked_before_any_input_is_read():
    from registry_db.errors import UsageError

    with pytest.raises(UsageError, match="--k 10000000 is outside 1..64"):
        read_vllm_metrics("no-such-file.prom", None, Facts(**{**FACTS.__dict__, "k": 10**7}))
    result = run("ingest", "vllm-metrics", "no-such-file.prom", *ARGS[:4], "--k", "10000000")
    assert result.exit_code == 2 and "not in the range 1<=x<=64" in result.stderr


def test_hostile_scrapes_are_indexed_once(tmp_path, monkeypatch):
    """2,000 engines whose counters all went down: one finding per series, each with its line,
    and the text parsed once whole and once per counter line, not once per finding."""
    import prometheus_client.parser as parser

    n = 2000
    pre = "vllm:spec_decode_num_"

    def engines(value: int) -> str:
        return "".join(f'{pre}{c}_total{{engine="{e}"}} {value}\n'
                       for c in ("drafts", "draft_tokens", "accepted_tokens") for e in range(n)) \
            + "".join(f'{pre}accepted_tokens_per_pos_total{{engine="{e}",position="{i}"}} 0\n'
                      for e in range(n) for i in range(3))
    up, down = tmp_path / "up.prom", tmp_path / "down.prom"
    up.write_text("# TYPE vllm:spec_decode_num_drafts counter\n" + engines(10)
                  + f'{pre}drafts_total{{engine="extra"}} 5\n')
    down.write_text(engines(5) + f'{pre}drafts_total{{engine="extra"}} 9\n')
    calls = []
    real = parser.text_string_to_metric_families
    monkeypatch.setattr(parser, "text_string_to_metric_families",
                        lambda text: calls.append(1) or real(text))
    findings = refused(after=str(down), before=str(up))
    assert len(findings) == 3 * n and {f.code for f in findings} == {"counter_went_down"}
    assert findings[0].line == 1 and findings[-1].line == 3 * n
    lines = 2 * (6 * n + 1)
    assert len(calls) == lines + 2


# --- inputs: stdin and URLs ----------------------------------------------------------------------

@pytest.fixture
def server():
    """A local HTTP server answering GET /metrics with after.prom (and /big with more)."""
    import http.server
    import threading

    body = Path(AFTER).read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the standard library's name)
            if self.path not in ("/metrics", "/big"):
                self.send_error(404, "Not Found")
                return
            data = body if self.path == "/metrics" else body * 50
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_an_http_after_is_fetched(server, tmp_path):
    out = tmp_path / "example-model-eagle3.yaml"
    result = run("ingest", "vllm-metrics", f"{server}/metrics", "--before", BEFORE, *ARGS,
                 "-o", str(out))
    assert result.exit_code == 0, result.stderr
    sets, _ = check_paths([out])
    (p,) = sets[0].profiles
    assert p.acceptance_length == 2.5165480322371905
    assert p.provenance.source == f"vLLM /metrics: {BEFORE} -> {server}/metrics"


def test_a_url_over_the_cap_or_missing_is_one_clear_line(server, monkeypatch):
    from registry_db.sources.counters import common as counters

    missing = run("ingest", "vllm-metrics", f"{server}/nothing", *ARGS)
    assert missing.exit_code == 1
    assert missing.stderr.splitlines()[0] == (
        f"{server}/nothing: (document): the server answered HTTP 404 Not Found")
    monkeypatch.setattr(counters, "MAX_INPUT_BYTES", 20000)
    (finding,) = refused(after=f"{server}/big", before=None)
    assert finding.code == "too_large"


def test_a_server_that_is_down_is_one_clear_line():
    import socket

    with socket.socket() as s:  # a port that was free a moment ago and has no listener
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = run("ingest", "vllm-metrics", f"http://127.0.0.1:{port}/metrics", *ARGS)
    assert result.exit_code == 1 and result.stdout == ""
    first, summary = result.stderr.splitlines()
    assert first.startswith(f"http://127.0.0.1:{port}/metrics: (document): cannot fetch it: ")
    assert "is the server up" in first and summary == "1 error(s), 0 warning(s)"


def test_a_server_that_never_answers_times_out(monkeypatch):
    import socket

    from registry_db.sources.counters import common as counters

    monkeypatch.setattr(counters, "FETCH_TIMEOUT", 0.2)
    with socket.socket() as listener:  # accepts connections, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        (finding,) = refused(after=f"http://127.0.0.1:{listener.getsockname()[1]}/m",
                             before=None)
    assert finding.code == "fetch_failed"
    assert finding.message in (
        "cannot fetch it: timed out; is the server up at that address?",
        "cannot fetch it: no answer within 0.2 s",
        "no complete answer within 0.2 s (the limit on a whole fetch); is the server up and "
        "answering?"), finding.message


def test_dash_reads_stdin():
    result = run("ingest", "vllm-metrics", "-", "--before", BEFORE, *ARGS,
                 input=Path(AFTER).read_text())
    assert result.exit_code == 0, result.stderr
    assert "acceptance_length: 2.5165480322371905" in result.stdout
    both = run("ingest", "vllm-metrics", "-", "--before", "-", *ARGS)
    assert both.exit_code == 2 and "cannot both be -" in both.stderr


@pytest.mark.parametrize("command", ["vllm-metrics", "atom-metrics", "sglang", "trtllm-stats"])
def test_every_missing_flag_is_named_at_once(command):
    result = run("ingest", command, AFTER, "--model", "m", "--k", "3")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        "Error: missing options --method, --thinking, --category, --hardware, --engine-image, "
        "--temperature")


@pytest.mark.parametrize("command", ["vllm-metrics", "atom-metrics", "sglang", "trtllm-stats"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_temperature_that_is_not_finite_is_a_usage_error(command, value):
    result = run("ingest", command, AFTER, *ARGS[:-2], "--temperature", value)
    assert result.exit_code == 2
    # -inf is below the range's 0 first; nan and inf pass every range test, and are refused.
    assert ("not in the range" if value == "-inf" else "not a finite number") in result.stderr


def test_round_needs_two_places_since_the_counts_hold_al_within_a_hundredth():
    result = run("ingest", "vllm-metrics", AFTER, *ARGS, "--round", "1")
    assert result.exit_code == 2 and "--round" in result.stderr
