"""Trust, on both backends: a stored value's standard error in every resolution (one run and a
batch, now and as of a time) equal to a case computed by hand and to the view's; and
``registry check``, a measured run against the registry: consistent (exit 0), drift (exit 1,
with the figures), a refused resolution and a bad scrape each with their own message, every
counter source, a deployment, and ``--batch``.

The scrapes are vLLM's /metrics with vLLM's own metric names and labels: the counters
``vllm:spec_decode_num_drafts``, ``..._num_draft_tokens``, ``..._num_accepted_tokens`` and
``..._num_accepted_tokens_per_pos`` (label ``position``, 0..K-1, counting the steps that
accepted at least position + 1 drafts) of ``SpecDecodingProm`` in vllm-project/vllm
ee4ceaae5953d367d8edd2132fd86d6c42506e1e, vllm/v1/spec_decode/metrics.py, exposed with the
``model_name`` and ``engine`` labels (tests/data/sources/vllm/after.prom and before.prom, and
drifted.prom: one engine since the server's start, AL 1 + 4800 / 12000 = 1.4). The ATOM,
SGLang and TensorRT-LLM fixtures (its iteration stats and its Prometheus per-position counters)
are those their readers' tests cite.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import pytest
from sqlalchemy import text

from registry_db.errors import ResolutionRefused
from registry_db.model import Counts
from registry_db.resolve.check import Threshold, check_run, compare
from registry_db.resolve.plan import Request, resolve, resolve_many
from tests.helpers import run_cli

DATA = Path(__file__).resolve().parents[1] / "data" / "sources"
VLLM = DATA / "vllm"
AFTER, BEFORE, DRIFTED = (str(VLLM / n) for n in ("after.prom", "before.prom", "drifted.prom"))

#: By hand, K = 3, D = 10 steps, A = 15 accepted, a = (7, 5, 3): mu = 1.5,
#: Var X = (1*7 + 3*5 + 5*3) / 10 - 1.5^2 = 3.7 - 2.25 = 1.45 (exact), and the bound from the
#: totals mu (K - mu) = 1.5 * 1.5 = 2.25; stderr = sqrt(Var / D).
EXACT, BOUND = math.sqrt(0.145), math.sqrt(0.225)

HAND = """kind: AcceptanceProfileSet
name: hand
profiles:
  - model: m
    speculative_method: mtp
    num_spec_tokens: 3
    thinking: "on"
    category: coding
    acceptance_length: 2.5
    counts: {drafts: 10, draft_tokens: 30, accepted_tokens: 15, accepted_per_position: [7, 5, 3]}
    method: measured
    provenance: &p
      source: https://example.org/run
      hardware: b300
      engine_image: vllm:1
      sampling: {temperature: 0.0}
  - model: m
    speculative_method: mtp
    num_spec_tokens: 3
    thinking: "off"
    category: coding
    acceptance_length: 2.5
    counts: {drafts: 10, draft_tokens: 30, accepted_tokens: 15}
    method: measured
    provenance: *p
  - model: m
    speculative_method: mtp
    num_spec_tokens: 3
    thinking: "off"
    category: chat
    acceptance_length: 2.25
    method: measured
    provenance: *p
"""

#: The registry the checks run against: off/coding holds the counts of the vLLM fixtures'
#: run (before.prom -> after.prom), on/coding is the issue's 3.84 (counts without positions),
#: off/chat a value without counts; then one profile per other engine's fixture.
GOLDEN = """kind: AcceptanceProfileSet
name: golden
profiles:
  - model: example-model
    speculative_method: eagle3
    num_spec_tokens: 3
    thinking: "off"
    category: coding
    acceptance_length: 2.52
    counts: {drafts: 84995, draft_tokens: 254985, accepted_tokens: 128899,
             accepted_per_position: [61234, 40000, 27665]}
    method: measured
    provenance: &p
      source: https://example.org/golden
      hardware: b300
      engine_image: vllm:1
      sampling: {temperature: 0.6}
  - model: example-model
    speculative_method: eagle3
    num_spec_tokens: 3
    thinking: "on"
    category: coding
    acceptance_length: 3.84
    counts: {drafts: 84142, draft_tokens: 252426, accepted_tokens: 238963}
    method: measured
    provenance: *p
  - model: example-model
    speculative_method: eagle3
    num_spec_tokens: 3
    thinking: "off"
    category: chat
    acceptance_length: 1.41
    method: measured
    provenance: *p
  - {model: kimi-k3, speculative_method: dspark, num_spec_tokens: 3, thinking: "on",
     category: coding, acceptance_length: 3.14, method: measured, provenance: *p}
  - {model: glm-5.2, speculative_method: eagle, num_spec_tokens: 3, thinking: "on",
     category: coding, acceptance_length: 2.83, method: measured, provenance: *p}
  - {model: deepseek-v4, speculative_method: mtp, num_spec_tokens: 3, thinking: "on",
     category: coding, acceptance_length: 2.82, method: measured, provenance: *p}
"""

TERMS = ("--model", "example-model", "--method", "eagle3", "--k", "3")
OFF_CODING = (*TERMS, "--thinking", "off", "--category", "coding")
ON_CODING = (*TERMS, "--thinking", "on", "--category", "coding")


def _import(url: str, folder: Path, text_: str, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.yaml").write_text(text_, encoding="utf-8")
    result = run_cli("-d", url, "import", str(folder / f"{name}.yaml"))
    assert result.exit_code == 0, result.stderr


@pytest.fixture
def hand(db_url, tmp_path) -> str:
    _import(db_url, tmp_path / "acc", HAND, "hand")
    return db_url


@pytest.fixture
def golden(db_url, tmp_path) -> str:
    _import(db_url, tmp_path / "acc", GOLDEN, "golden")
    return db_url


def check(url: str, *args: str, input: str | None = None):
    return run_cli("-d", url, "check", *args, input=input)


def stderr_of(answer: dict) -> float:
    return answer["uncertainty"]["stderr"]


# --- the uncertainty in every resolution ----------------------------------------------------------

def test_resolve_json_carries_the_hand_computed_stderr_and_the_counts(hand):
    for thinking, expected, exact in (("on", EXACT, True), ("off", BOUND, False)):
        result = run_cli("-d", hand, "resolve", "--model", "m", "--method", "mtp", "--k", "3",
                         "--thinking", thinking, "--category", "coding", "--json")
        assert result.exit_code == 0, result.stderr
        answer = json.loads(result.stdout)
        assert abs(stderr_of(answer) - expected) < 1e-12
        assert answer["uncertainty"]["drafts"] == 10
        assert answer["uncertainty"]["exact"] is exact
        assert answer["counts"] == {"drafts": 10, "draft_tokens": 30, "accepted_tokens": 15,
                                    **({"accepted_per_position": [7, 5, 3]} if exact else {})}
        keys = list(answer)
        assert keys[keys.index("source") + 1:keys.index("source") + 3] == ["uncertainty",
                                                                            "counts"]
    # A profile without counts says so with nulls, not by leaving the keys out.
    plain = json.loads(run_cli("-d", hand, "resolve", "--model", "m", "--method", "mtp", "--k",
                               "3", "--thinking", "off", "--category", "chat", "--json").stdout)
    assert plain["uncertainty"] is None and plain["counts"] is None


def test_the_view_gives_the_figure_resolve_gives(hand, engine):
    with engine.connect() as conn:
        view = {r.thinking: (r.al_stderr, r.al_stderr_exact) for r in conn.execute(text(
            "SELECT thinking, al_stderr, al_stderr_exact FROM acceptance_profiles "
            "WHERE category = 'coding'"))}
    got = {t: resolve(engine, Request("m", "mtp", 3, t, "coding")).uncertainty
           for t in ("on", "off")}
    for thinking, expected in (("on", EXACT), ("off", BOUND)):
        assert abs(view[thinking][0] - expected) < 1e-12
        assert got[thinking].stderr == view[thinking][0]  # the same stored number
        assert bool(view[thinking][1]) is got[thinking].exact


def test_every_statement_reads_the_counts_now_and_as_of_a_time(hand, engine):
    """The one-run and the many-runs statements, on the current registry and on the history:
    each answer's counts and stderr are the profile's, and a batch's equal one run's."""
    later = "2999-01-01T00:00:00Z"
    for as_of in (None, later):
        requests = [Request("m", "mtp", 3, t, c, as_of=as_of)
                    for t, c in (("on", "coding"), ("off", "coding"), ("off", "chat"))]
        one = [resolve(engine, r) for r in requests]
        many = resolve_many(engine, requests)
        assert many == one
        assert abs(one[0].uncertainty.stderr - EXACT) < 1e-12
        assert abs(one[1].uncertainty.stderr - BOUND) < 1e-12
        assert one[0].counts == Counts(10, 30, 15, (7, 5, 3))
        assert one[1].counts == Counts(10, 30, 15)
        assert one[2].uncertainty is None and one[2].counts is None


def test_batch_lines_carry_it(hand, tmp_path):
    runs = tmp_path / "runs.jsonl"
    runs.write_text("\n".join(json.dumps({"model": "m", "method": "mtp", "k": 3, "thinking": t,
                                          "category": c})
                              for t, c in (("on", "coding"), ("off", "chat"))) + "\n")
    result = run_cli("-d", hand, "resolve", "--batch", str(runs))
    assert result.exit_code == 0, result.stderr
    first, second = map(json.loads, result.stdout.splitlines())
    assert abs(stderr_of(first) - EXACT) < 1e-12 and first["counts"]["drafts"] == 10
    assert second["uncertainty"] is None and second["counts"] is None


def test_resolve_text_shows_the_stderr_beside_the_value(hand):
    result = run_cli("-d", hand, "resolve", "--model", "m", "--method", "mtp", "--k", "3",
                     "--thinking", "off", "--category", "coding")
    assert result.stdout.splitlines()[0] == "AL       2.5 ± ≤0.47"


# --- registry check -------------------------------------------------------------------------------

def _vllm_run(per: tuple[int, ...], drafts: int, accepted: int) -> tuple[float, float]:
    """AL and its exact stderr for a vLLM run's counts (K = 3), computed here as the formula
    says, independently of the library."""
    mu = accepted / drafts
    var = sum((2 * i - 1) * a for i, a in enumerate(per, 1)) / drafts - mu * mu
    return 1 + mu, math.sqrt(var / drafts)


def test_a_run_that_matches_the_registry_is_consistent(golden):
    result = check(golden, AFTER, "--before", BEFORE, *OFF_CODING)
    assert result.exit_code == 0, result.stderr
    al, se = _vllm_run((61234, 40000, 27665), 84995, 128899)
    # The registry's counts are this run's: z is measured from their own mean (2.51656), not
    # from the stored 2.52 they round to (which gave z = -0.7 for the very same run).
    assert result.stdout == (
        f"measured {round(al, 4)} ± {se:.2g} over 84,995 steps; registry 2.52 (counts "
        f"{al:.4f} ± {se:.2g}) from golden revision 1; consistent, z = 0.0 (|z| <= 3)\n")


def test_a_run_that_drifted_exits_1_with_the_figures(golden):
    result = check(golden, DRIFTED, *ON_CODING, "--json")
    assert result.exit_code == 1, result.stderr
    got = json.loads(result.stdout)
    al, se = _vllm_run((3000, 1300, 500), 12000, 4800)
    mu = 238963 / 84142
    registered_se = math.sqrt(mu * (3 - mu) / 84142)  # its counts have no positions: the bound
    assert list(got) == ["verdict", "measured", "registered", "difference", "z", "max_z",
                         "tolerance"]
    assert got["verdict"] == "drift"
    assert got["measured"] == {"acceptance_length": 1.4, "drafts": 12000,
                               "stderr": pytest.approx(se, abs=1e-12), "exact": True}
    assert got["registered"]["acceptance_length"] == 3.84
    assert got["registered"]["profile"] == "example-model/eagle3/k3/thinking-on/coding"
    assert got["registered"]["uncertainty"]["exact"] is False
    assert got["difference"] == pytest.approx(1.4 - 3.84, abs=1e-12)
    assert got["z"] == pytest.approx((1.4 - (1 + mu)) / math.hypot(se, registered_se),
                                     rel=1e-9)
    assert got["z"] < -300
    assert (got["max_z"], got["tolerance"]) == (3.0, None)
    text_ = check(golden, DRIFTED, *ON_CODING)
    assert text_.exit_code == 1
    assert text_.stdout == (
        f"measured 1.4 ± {se:.2g} over 12,000 steps; registry 3.84 ± ≤{registered_se:.2g} from "
        f"golden revision 1; drift, z = {got['z']:.1f} (|z| > 3); ± ≤S: at most S, the totals "
        "give no per-position counts\n")


def test_a_value_without_counts_has_no_spread_of_its_own(golden):
    """off/chat stores 1.41 without counts: z is the measured stderr alone."""
    result = check(golden, DRIFTED, *TERMS, "--thinking", "off", "--category", "chat", "--json")
    assert result.exit_code == 0, result.stderr
    got = json.loads(result.stdout)
    _, se = _vllm_run((3000, 1300, 500), 12000, 4800)
    assert got["registered"]["uncertainty"] is None
    assert got["z"] == pytest.approx((1.4 - 1.41) / se, rel=1e-9)


def test_tolerance_instead_of_z_and_never_both(golden):
    args = (DRIFTED, *TERMS, "--thinking", "off", "--category", "chat")
    loose = check(golden, *args, "--tolerance", "0.05", "--json")
    assert loose.exit_code == 0
    assert (json.loads(loose.stdout)["max_z"], json.loads(loose.stdout)["tolerance"]) == (
        None, 0.05)
    tight = check(golden, *args, "--tolerance", "0.005")
    assert tight.exit_code == 1
    assert "drift, difference -0.0100 (past ±0.005)" in tight.stdout
    assert check(golden, *args, "--max-z", "0.5").exit_code == 1  # |z| = 1.4 > 0.5
    both = check(golden, *args, "--max-z", "3", "--tolerance", "0.1")
    assert both.exit_code == 2 and "give one" in both.stderr
    assert check(golden, *args, "--max-z", "nan").exit_code == 2


def test_a_refused_resolution_says_it_is_a_refusal(golden):
    result = check(golden, DRIFTED, *TERMS, "--thinking", "off", "--category", "math")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("refused (no_match): no profile "
                                    "example-model/eagle3/k3/thinking-off/math")
    as_json = check(golden, DRIFTED, *TERMS, "--thinking", "off", "--category", "math",
                    "--json")
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout)["refused"]["reason"] == "no_match"
    # The scope and the pin are the resolver's: an unknown set, a fallback that stands in.
    assert "unknown_set" in check(golden, DRIFTED, *ON_CODING, "--set", "nope").stderr
    fallback = check(golden, DRIFTED, *TERMS, "--thinking", "off", "--category", "math",
                     "--fallback-category", "chat", "--json")
    assert fallback.exit_code == 0, fallback.stderr
    assert json.loads(fallback.stdout)["registered"]["fallback"] == {"replaced": "math",
                                                                     "category": "chat"}


def test_a_bad_scrape_says_where(golden, tmp_path):
    broken = tmp_path / "broken.prom"
    broken.write_text("".join(line for line in Path(DRIFTED).read_text().splitlines(True)
                              if "num_drafts" not in line))
    result = check(golden, str(broken), *ON_CODING)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "refused" not in result.stderr
    assert result.stderr.startswith(
        f"{broken}: vllm:spec_decode_num_drafts: vllm:spec_decode_num_drafts_total is missing; "
        "scrape vLLM's /metrics with speculative decoding on")
    # A counter that went down between the scrapes is named at its line.
    down = check(golden, BEFORE, "--before", AFTER, *OFF_CODING)
    assert down.exit_code == 1
    assert f"{BEFORE}:6:1: vllm:spec_decode_num_drafts: " in down.stderr
    # An input that holds no engine's counters, or is not there at all.
    empty = tmp_path / "empty.prom"
    empty.write_text("# nothing\n")
    unknown = check(golden, str(empty), *ON_CODING)
    assert unknown.exit_code == 1 and "no counter source's counters are in it" in unknown.stderr
    missing = check(golden, str(tmp_path / "absent.prom"), *ON_CODING)
    assert missing.exit_code == 1 and "cannot read the file" in missing.stderr
    # The source said outright is the one read: ATOM's reader names what it was given.
    wrong = check(golden, DRIFTED, *ON_CODING, "--source", "atom")
    assert wrong.exit_code == 1 and "this is vLLM's /metrics scrape" in wrong.stderr
    assert "`registry check --source vllm`" in wrong.stderr


@pytest.mark.parametrize(("files", "model", "method", "al"), [
    (("atom/after.prom", "atom/before.prom"), "kimi-k3", "dspark", 1 + Fraction(30000, 14000)),
    (("sglang/responses.jsonl",), "glm-5.2", "eagle", 1 + Fraction(55, 30)),
    (("trtllm/stats.json",), "deepseek-v4", "mtp", 1 + Fraction(20, 11)),
    (("trtllm/after.prom", "trtllm/before.prom"), "deepseek-v4", "mtp", 1 + Fraction(20, 11)),
])
def test_every_counter_source_is_told_from_its_counters(golden, files, model, method, al):
    after, *before = (str(DATA / f) for f in files)
    result = check(golden, after, *(("--before", before[0]) if before else ()), "--model", model,
                   "--method", method, "--k", "3", "--thinking", "on", "--category", "coding",
                   "--json")
    assert result.exit_code == 0, result.stderr
    # The nearest float of the exact AL, as the source's own reader gives it.
    assert json.loads(result.stdout)["measured"]["acceptance_length"] == float(al)


@pytest.mark.parametrize("form", ["vllm-bench", "vllm-log"])
def test_a_bench_result_and_a_server_log_are_checked_like_a_scrape(golden, tmp_path, form):
    from tests.helpers import vllm_bench_result, vllm_log_line

    # 300 steps at K = 3: accepted 420, per position 200, 130, 90
    if form == "vllm-bench":
        path = tmp_path / "run.json"
        path.write_text(json.dumps(vllm_bench_result((0, 0, 0, (0, 0, 0)),
                                                     (300, 900, 420, (200, 130, 90)))))
    else:
        path = tmp_path / "server.log"
        path.write_text(vllm_log_line(420, 900, 300, (200, 130, 90)) + "\n")
    result = check(golden, str(path), "--model", "kimi-k3", "--method", "dspark", "--k", "3",
                   "--thinking", "on", "--category", "coding", "--json")
    assert result.exit_code in (0, 1), result.stderr
    assert json.loads(result.stdout)["measured"]["acceptance_length"] == 1 + 420 / 300


def test_a_restart_between_the_scrapes_is_refused_before_any_verdict(golden, tmp_path):
    """The issue's scrapes: every counter higher, the counters made at two times; check used
    to report a false drift (z = 6.6) from them."""
    from tests.helpers import vllm_scrape

    before, after = tmp_path / "before.prom", tmp_path / "after.prom"
    before.write_text(vllm_scrape({0: (2000, 6000, 3000, (1400, 1000, 600))},
                                  created=1796451477.54))
    after.write_text(vllm_scrape({0: (40000, 120000, 61135, (29000, 19500, 12635))},
                                 created=1796451479.07))
    result = check(golden, str(after), "--before", str(before), *ON_CODING, "--json")
    assert result.exit_code == 1
    got = json.loads(result.stdout)
    assert got["valid"] is False and {p["code"] for p in got["problems"]} == {"server_restarted"}
    assert "1796451477.54" in got["problems"][0]["message"]
    assert "1796451479.07" in got["problems"][0]["message"]
    text = check(golden, str(after), "--before", str(before), *ON_CODING)
    assert text.exit_code == 1 and "server restarted between the scrapes" in text.stderr


@pytest.fixture
def server():
    """A local HTTP server answering GET /metrics with after.prom, counting the requests."""
    import http.server
    import threading

    body, seen = Path(AFTER).read_bytes(), []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the standard library's name)
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    httpd.shutdown()
    httpd.server_close()


def test_after_may_be_a_url_fetched_once_or_stdin(golden, server):
    url, seen = server
    fetched = check(golden, f"{url}/metrics", "--before", BEFORE, *OFF_CODING, "--json")
    assert fetched.exit_code == 0, fetched.stderr
    assert seen == ["/metrics"]  # told apart and read from one fetch
    piped = check(golden, "-", "--before", BEFORE, *OFF_CODING, "--json",
                  input=Path(AFTER).read_text())
    assert piped.exit_code == 0, piped.stderr
    assert json.loads(piped.stdout) == json.loads(fetched.stdout)
    assert check(golden, "-", "--before", "-", *OFF_CODING).exit_code == 2


def test_sources_without_a_before_refuse_one(golden):
    result = check(golden, str(DATA / "sglang" / "responses.jsonl"), "--before", AFTER,
                   "--model", "glm-5.2", "--method", "eagle", "--k", "3", "--thinking", "on",
                   "--category", "coding")
    assert result.exit_code == 2 and "drop --before" in result.stderr
    # --model-name picks a served model of vLLM's scrape, and only there.
    atom = check(golden, str(DATA / "atom" / "after.prom"), "--model-name", "x", "--model",
                 "kimi-k3", "--method", "dspark", "--k", "3", "--thinking", "on", "--category",
                 "coding")
    assert atom.exit_code == 2 and "--model-name picks a served model" in atom.stderr
    two = str(VLLM / "after-two-models.prom")
    assert "several_models" in check(golden, two, *OFF_CODING, "--json").stdout
    picked = check(golden, two, "--model-name", "example/model", *OFF_CODING)
    assert picked.exit_code == 0, picked.stderr


def test_a_deployment_is_checked_at_its_one_speculating_pool(golden, tmp_path):
    one = tmp_path / "one.yaml"
    one.write_text("pools:\n  - name: prefill\n  - name: decode\n    engine:\n"
                   "      speculative: {method: eagle3, num_spec_tokens: 3}\n")
    result = check(golden, AFTER, "--before", BEFORE, "--model", "example-model",
                   "--deployment", str(one), "--thinking", "off", "--category", "coding",
                   "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["registered"]["acceptance_length"] == 2.52
    two = tmp_path / "two.yaml"
    two.write_text("pools:\n  - name: a\n    engine:\n      speculative: {method: eagle3, "
                   "num_spec_tokens: 3}\n  - name: b\n    engine:\n      speculative: "
                   "{method: mtp, num_spec_tokens: 2}\n")
    refused = check(golden, AFTER, "--model", "example-model", "--deployment", str(two),
                    "--thinking", "off", "--category", "coding")
    assert refused.exit_code == 1
    assert "2 pools of the deployment speculate ('a', 'b')" in refused.stderr
    assert check(golden, AFTER, *OFF_CODING, "--deployment", str(one)).exit_code == 2


def test_usage(golden):
    assert check(golden, *OFF_CODING).exit_code == 2  # no AFTER
    assert check(golden, AFTER, "--model", "example-model").exit_code == 2  # no --method, --k
    assert check(golden, "--batch", "x.jsonl", AFTER).exit_code == 2
    assert "Example:" in check(golden, "--help").stdout


# --- check --batch --------------------------------------------------------------------------------

def _line(thinking: str, category: str, counts: dict | None, **more) -> str:
    obj = {"model": "example-model", "method": "eagle3", "k": 3, "thinking": thinking,
           "category": category, **more}
    if counts is not None:
        obj["counts"] = counts
    return json.dumps(obj)


GOOD = {"drafts": 84995, "draft_tokens": 254985, "accepted_tokens": 128899,
        "accepted_per_position": [61234, 40000, 27665]}
DRIFTING = {"drafts": 12000, "draft_tokens": 36000, "accepted_tokens": 4800}


def test_batch_checks_every_line_in_one_pass(golden, tmp_path):
    lines = [
        _line("off", "coding", GOOD, id="good"),
        _line("on", "coding", DRIFTING),
        "",
        _line("off", "math", GOOD, id=7),
        _line("off", "coding", None),
        _line("off", "coding", {**GOOD, "accepted_per_position": [61234, 40000]}),
        "{not json",
        _line("off", "coding", {"drafts": 10, "draft_tokens": 30, "accepted_tokens": 15},
              bogus=1),
    ]
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = check(golden, "--batch", str(path), "--json")
    assert result.exit_code == 1, result.stderr
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(answers) == 7  # the blank line gets no answer
    good, drifting, refused, no_counts, bad_counts, not_json, unknown = answers
    assert good["id"] == "good" and good["verdict"] == "consistent"
    assert list(good)[1:] == ["verdict", "measured", "registered", "difference", "z", "max_z",
                              "tolerance"]
    single = json.loads(check(golden, AFTER, "--before", BEFORE, *OFF_CODING, "--json").stdout)
    assert {k: v for k, v in good.items() if k != "id"} == single  # as one run would get it
    assert drifting["verdict"] == "drift" and drifting["measured"]["exact"] is False
    assert refused == {"id": 7, "refused": {"reason": "no_match", "message": refused[
        "refused"]["message"]}}
    assert no_counts["refused"]["reason"] == "invalid_request"
    assert no_counts["refused"]["message"].startswith("line 5: counts is required")
    assert bad_counts["refused"]["message"].startswith(
        "line 6: counts.accepted_per_position: accepted_per_position has 2 entries but "
        "num_spec_tokens is 3")
    assert not_json["refused"]["message"].startswith("line 7: not a JSON object")
    assert unknown["refused"]["reason"] == "invalid_request" and "bogus" in unknown[
        "refused"]["message"]


def test_batch_of_consistent_runs_exits_0_and_reads_as_text(golden, tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text(_line("off", "coding", GOOD) + "\n" + _line("off", "chat", DRIFTING, id="c")
                    + "\n")
    result = check(golden, "--batch", str(path))
    assert result.exit_code == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert first.startswith("1: measured 2.5165 ± 0.0041 over 84,995 steps; registry 2.52 ")
    assert second.startswith("2 (c): measured 1.4 ± ≤0.0093 over 12,000 steps; registry 1.41 "
                             "from golden revision 1; consistent")
    # The same lines past a tighter tolerance: the second drifts, and the batch fails.
    assert check(golden, "--batch", str(path), "--tolerance", "0.005").exit_code == 1
    # Read from stdin as resolve --batch is.
    assert check(golden, "--batch", "-", input=path.read_text()).exit_code == 0


# --- the library ---------------------------------------------------------------------------------

def test_library_check_run_and_compare(golden, engine):
    counts = Counts(12000, 36000, 4800, (3000, 1300, 500))
    result = check_run(engine, Request("example-model", "eagle3", 3, "on", "coding"), counts)
    assert result.drifted and result.z < -300
    assert result.registered == resolve(engine, Request("example-model", "eagle3", 3, "on",
                                                        "coding"))
    loose = compare(result.measured, result.registered, Threshold(None, 3.0))
    assert loose.verdict == "consistent" and loose.z == result.z
    with pytest.raises(ResolutionRefused):
        check_run(engine, Request("example-model", "eagle3", 3, "on", "math"), counts)
    with pytest.raises(ValueError):
        Threshold(3.0, 0.1)


# --- the README's example -------------------------------------------------------------------------

def _readme_block(marker: str) -> tuple[list[list[str]], str]:
    """The commands (a command continues on its indented lines) and the text shown after the
    README block ``<!-- example: MARKER -->``."""
    import re
    import shlex

    readme = (DATA.parents[2] / "README.md").read_text(encoding="utf-8")
    tail = readme.split(f"<!-- example: {marker} -->", 1)[1]
    commands, shown = re.search(r"```sh\n(.*?)```\n```text\n(.*?)```", tail, re.S).groups()
    return [shlex.split(line) for line in re.sub(r"\\?\n(?= )", " ", commands).splitlines()], \
        shown


def test_the_readmes_check_example_runs_as_written(tmp_path, monkeypatch):
    """After the README's ingest example (its registry), the check example prints what the
    README shows: the matching run consistent (exit 0), the drifted one drift (exit 1)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REGISTRY_DATABASE_URL", raising=False)
    (tmp_path / "tests").symlink_to(DATA.parents[1])
    ingest, _ = _readme_block("ingest")
    for _, *args in ingest:
        assert run_cli(*args).exit_code == 0
    checks, shown = _readme_block("check")
    results = [run_cli(*args) for _, *args in checks]
    assert [program for program, *_ in checks] == ["registry", "registry"]
    assert [r.exit_code for r in results] == [0, 1]
    assert "".join(r.stdout for r in results) == shown
