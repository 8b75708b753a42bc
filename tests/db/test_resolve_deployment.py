"""A run with a deployment, on both backends: one resolution per speculating pool (by pool
name), k_mismatch naming the pool, "not speculating" with a warning, and `--deployment`."""

from __future__ import annotations

import json

import pytest

from registry_db.errors import ResolutionRefused
from registry_db.importing import write as importer
from registry_db.inputs.deployment import Deployment, Pool
from registry_db.model import InlineValue, Pin
from registry_db.resolve.deployment import resolve_deployment
from registry_db.resolve.plan import Request, resolve
from tests.helpers import SETS, make_set, prof
from tests.helpers import run_resolve as run

#: Two pools that speculate differently, one that does not.
MIXED = Deployment((Pool("prefill"), Pool("decode", "eagle", 3), Pool("draft2", "eagle", 2)))
QUIET = Deployment((Pool("prefill"), Pool("decode")))


def _build(engine) -> None:
    importer.import_sets(engine, [*SETS, make_set("delta", prof("solo", "coding", 1.9, k=2))])


@pytest.fixture
def reg(shared_registry):
    return shared_registry("sets-and-delta", _build)


def request(**kw) -> Request:
    # method and K are the pools'; the request's own stand in and are replaced.
    return Request("solo", "-", 1, "off", "coding", sets=("alpha", "delta"), **kw)


def test_one_resolution_per_speculating_pool_by_name(reg):
    answer = resolve_deployment(reg, request(), MIXED)
    assert [name for name, _ in answer.pools] == ["decode", "draft2"]
    decode, draft2 = (r for _, r in answer.pools)
    # Each pool's answer is what the run alone at that pool's method and K resolves to.
    assert decode == resolve(reg, Request("solo", "eagle", 3, "off", "coding",
                                          sets=("alpha", "delta")))
    assert (decode.num_spec_tokens, decode.acceptance_length) == (3, 2.5)
    assert (draft2.num_spec_tokens, draft2.acceptance_length) == (2, 1.9)
    body = answer.to_json()
    assert body["speculating"] is True and body["warnings"] == []
    assert list(body["pools"]) == ["decode", "draft2"]
    assert body["pools"]["decode"] == decode.to_json()


def test_a_stated_value_must_name_the_k_of_each_speculating_pool(reg):
    single = Deployment((Pool("decode", "eagle", 3),))
    answer = resolve_deployment(reg, request(cli=InlineValue(3, acceptance_length=2.2)), single)
    assert answer.pools[0][1].layer == "cli" and answer.pools[0][1].acceptance_length == 2.2
    # K 3 matches decode but not draft2: the refusal names the pool whose K it misses.
    with pytest.raises(ResolutionRefused) as info:
        resolve_deployment(reg, request(cli=InlineValue(3, acceptance_length=2.2)), MIXED)
    assert info.value.reason == "k_mismatch"
    assert info.value.message.startswith(
        "pool 'draft2' speculates K = 2, but the cli layer's value was stated for K = 3")
    # At every layer, winning or not.
    for kw, layer in ((dict(workload=InlineValue(2, acceptance_length=1.5)), "workload"),
                      (dict(pin=Pin(value=InlineValue(2, acceptance_length=1.5))), "scenario")):
        with pytest.raises(ResolutionRefused) as info:
            resolve_deployment(reg, request(**kw), MIXED)
        assert info.value.reason == "k_mismatch"
        assert f"pool 'decode' speculates K = 3, but the {layer} layer's" in info.value.message


def test_an_invalid_value_is_invalid_before_its_k_is_compared(reg):
    with pytest.raises(ResolutionRefused) as info:
        resolve_deployment(reg, request(cli=InlineValue(3, acceptance_length=9.0)), MIXED)
    assert info.value.reason == "invalid_value"


def test_no_pool_speculating_answers_not_speculating(reg):
    answer = resolve_deployment(reg, request(), QUIET)
    assert answer.to_json() == {"speculating": False, "pools": {}, "warnings": []}
    stated = resolve_deployment(reg, request(workload=InlineValue(3, acceptance_length=2.0),
                                             cli=InlineValue(2, acceptance_rate=0.5)), QUIET)
    assert not stated.speculating
    assert stated.warnings == (
        "no pool of the deployment speculates; the workload layer's stated acceptance is not "
        "used",
        "no pool of the deployment speculates; the cli layer's stated acceptance is not used")


def test_a_pools_refusal_names_the_pool(reg):
    with pytest.raises(ResolutionRefused) as info:
        resolve_deployment(reg, request(), Deployment((Pool("decode", "eagle", 3),
                                                       Pool("wide", "eagle", 4))))
    assert info.value.reason == "no_match"
    assert info.value.message.startswith("pool 'wide': no profile solo/eagle/k4/")


# --- the command line ---------------------------------------------------------------------------

@pytest.fixture
def url(shared_url):
    return shared_url("sets-and-delta", _build)


SOLO = ["--model", "solo", "--thinking", "off", "--category", "coding", "--set", "alpha",
        "--set", "delta"]
MIXED_YAML = ("pools:\n  - name: prefill\n"
              "  - name: decode\n    engine: {speculative: {method: eagle, num_spec_tokens: 3}}\n"
              "  - name: draft2\n    engine: {speculative: {method: eagle, num_spec_tokens: 2}}\n")


def deployment_file(tmp_path, text: str) -> str:
    path = tmp_path / "deploy.yaml"
    path.write_text(text)
    return str(path)


def test_cli_deployment_json_lists_the_pools(url, tmp_path):
    result = run(url, *SOLO, "--deployment", deployment_file(tmp_path, MIXED_YAML), "--json")
    assert result.exit_code == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["speculating"] is True and list(body["pools"]) == ["decode", "draft2"]
    assert body["pools"]["draft2"]["acceptance_length"] == 1.9


def test_cli_deployment_text_and_emit(url, tmp_path):
    path = deployment_file(tmp_path, MIXED_YAML)
    text = run(url, *SOLO, "--deployment", path).stdout
    assert text.startswith("pool     decode\nAL       2.5\n") and "\n\npool     draft2\nAL" in text
    emitted = run(url, *SOLO, "--deployment", path, "--emit", "trtllm").stdout
    assert emitted == ("# pool decode\nTLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=1.5\n"
                       "# pool draft2\nTLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS=0.9\n")
    warned = run(url, *SOLO, "--deployment", path, "--emit", "trtllm").stderr.splitlines()
    assert [w.split(":")[0:2] for w in warned] == [["warning", " pool decode"],
                                                   ["warning", " pool draft2"]]


def test_cli_deployment_shell_quotes_the_pool_name(url, tmp_path):
    """A pool name is the deployment file's text: under ``eval`` a newline in it would end the
    comment and run what follows, so the shell form escapes it."""
    odd = deployment_file(tmp_path, MIXED_YAML.replace("name: decode", "name: d $(echo hi)"))
    quoted = run(url, *SOLO, "--deployment", odd, "--emit", "sglang", "--shell")
    assert quoted.exit_code == 0 and quoted.stdout.startswith("# pool 'd $(echo hi)'\n")
    path = deployment_file(tmp_path, MIXED_YAML.replace("name: decode", 'name: "d\\necho hi"'))
    result = run(url, *SOLO, "--deployment", path, "--emit", "sglang", "--shell")
    if result.exit_code != 0:  # a name with a control character refused where it enters
        assert result.exit_code == 1 and "Traceback" not in result.stderr
        return
    first, *rest = result.stdout.splitlines()
    assert first == "# pool 'd\\necho hi'" and not any(x.startswith("echo") for x in rest)


def test_cli_k_mismatch_names_the_pool(url, tmp_path):
    result = run(url, *SOLO, "--deployment", deployment_file(tmp_path, MIXED_YAML),
                 "--acceptance-length", "2.2", "--k", "3")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("refused (k_mismatch): pool 'draft2' speculates K = 2")


def test_cli_not_speculating_warns_about_a_stated_value(url, tmp_path):
    path = deployment_file(tmp_path, "name: cpu\n")
    result = run(url, *SOLO, "--deployment", path, "--acceptance-length", "2.2", "--k", "3")
    assert result.exit_code == 0
    assert result.stdout == "not speculating: no pool of the deployment speculates\n"
    assert result.stderr == ("warning: no pool of the deployment speculates; the cli layer's "
                             "stated acceptance is not used\n")
    quiet = run(url, *SOLO, "--deployment", path)
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_cli_invalid_deployment_file_exits_1_with_findings(url, tmp_path):
    path = deployment_file(tmp_path, "pools:\n  - name: a\n    engine: {speculative: {}}\n")
    result = run(url, *SOLO, "--deployment", path)
    assert result.exit_code == 1
    assert f"{path}:3:27: pools[0].engine.speculative.method: method is required" in (
        result.stderr)


@pytest.mark.parametrize("args, needle", [
    (["--method", "eagle"], "drop --method"),
    (["--k", "3"], "drop --k"),
    (["--acceptance-length", "2"], "give --k"),
])
def test_cli_deployment_usage_errors(url, tmp_path, args, needle):
    result = run(url, *SOLO, "--deployment", deployment_file(tmp_path, MIXED_YAML), *args)
    assert result.exit_code == 2 and needle in result.stderr



# --- a batch line's "deployment" ----------------------------------------------------------------

#: MIXED_YAML as a batch line's JSON object.
MIXED_JSON = {"pools": [{"name": "prefill"},
                        {"name": "decode", "engine": {"speculative": {"method": "eagle",
                                                                      "num_spec_tokens": 3}}},
                        {"name": "draft2", "engine": {"speculative": {"method": "eagle",
                                                                      "num_spec_tokens": 2}}}]}
SOLO_LINE = {"model": "solo", "thinking": "off", "category": "coding",
             "sets": ["alpha", "delta"]}


def batch(url, *lines) -> tuple[int, list[dict]]:
    result = run(url, "--batch", "-", input="".join(json.dumps(ln) + "\n" for ln in lines))
    # Nothing on stderr but, when some line was no request, the line that names them (28.3).
    assert result.stderr == "" if result.exit_code == 0 else result.stderr.startswith(
        "1 line(s) were no request (answered invalid_request): line ")
    return result.exit_code, [json.loads(ln) for ln in result.stdout.splitlines()]


def test_batch_deployment_line_answers_as_the_single_run_does(url, tmp_path):
    """Each answer is what `--deployment` gives the same run alone, its id first; plain lines
    around it keep their own answers, in order."""
    path = deployment_file(tmp_path, MIXED_YAML)
    lines = [
        {"id": 1, **SOLO_LINE, "deployment": MIXED_JSON},
        {"id": 2, **SOLO_LINE, "method": "eagle", "k": 3},
        {"id": 3, **SOLO_LINE, "deployment": {"name": "cpu"},
         "cli": {"num_spec_tokens": 3, "acceptance_length": 2.2}},
        {"id": 4, **SOLO_LINE, "deployment": MIXED_JSON,
         "cli": {"num_spec_tokens": 3, "acceptance_length": 2.2}},
        {"id": 5, **SOLO_LINE, "deployment": {"name": "d", "engine": {"speculative": {
            "method": "eagle", "num_spec_tokens": 4}}}},
        {"id": 6, **SOLO_LINE, "deployment": {"pools": [{"name": "d", "engine": {
            "speculative": {"method": "eagle", "num_spec_tokens": 2}}}]},
         "as_of": "2100-01-01"},
    ]
    code, answers = batch(url, *lines)
    assert code == 0 and [a["id"] for a in answers] == [1, 2, 3, 4, 5, 6]
    alone = json.loads(run(url, *SOLO, "--deployment", path, "--json").stdout)
    assert answers[0] == {"id": 1, **alone}
    assert list(answers[0]["pools"]) == ["decode", "draft2"]
    assert answers[1] == {"id": 2, **json.loads(run(url, *SOLO, "--method", "eagle", "--k", "3",
                                                    "--json").stdout)}
    assert answers[2] == {"id": 3, "speculating": False, "pools": {}, "warnings": [
        "no pool of the deployment speculates; the cli layer's stated acceptance is not used"]}
    assert answers[3]["refused"]["reason"] == "k_mismatch"
    assert answers[3]["refused"]["message"].startswith("pool 'draft2' speculates K = 2")
    assert answers[4]["refused"]["reason"] == "no_match"
    assert answers[4]["refused"]["message"].startswith("pool 'd': no profile solo/eagle/k4/")
    assert answers[5]["pools"]["d"]["acceptance_length"] == 1.9


@pytest.mark.parametrize("line, needles", [
    ({**SOLO_LINE, "method": "eagle", "k": 3, "deployment": MIXED_JSON},
     ["method is the pools'", "drop 'method'", "drop 'k'"]),
    ({**SOLO_LINE, "deployment": {"pools": [{"name": "a", "engine": {"speculative": {}}}]}},
     ["deployment.pools[0].engine.speculative.method: method is required",
      "deployment.pools[0].engine.speculative.num_spec_tokens: num_spec_tokens is required"]),
    ({**SOLO_LINE, "deployment": {"pools": [{"nmae": "a"}]}},
     ["deployment.pools[0]", "'name'"]),
    ({**SOLO_LINE, "deployment": [1]}, ["deployment: ", "a deployment"]),
    ({"thinking": "off", "deployment": MIXED_JSON}, ["model is required"]),
])
def test_batch_deployment_line_that_is_not_one_is_invalid_request(url, line, needles):
    """Every problem of the line at once, the deployment's by key path, with its line number;
    the batch's other lines are still answered and the exit code is 1."""
    code, answers = batch(url, {**SOLO_LINE, "method": "eagle", "k": 3}, {"id": "x", **line})
    assert code == 1
    assert answers[0]["acceptance_length"] == 2.5
    assert answers[1]["id"] == "x" and answers[1]["refused"]["reason"] == "invalid_request"
    message = answers[1]["refused"]["message"]
    assert message.startswith("line 2: ")
    for needle in needles:
        assert needle in message


def test_batch_null_deployment_is_no_deployment(url):
    code, answers = batch(url, {**SOLO_LINE, "method": "eagle", "k": 3, "deployment": None})
    assert code == 0 and answers[0]["acceptance_length"] == 2.5


def test_batch_unknown_key_is_refused_even_when_null(url):
    # A misspelt key written null passed unnoticed: null means "not given" for a known key only.
    code, answers = batch(url, {**SOLO_LINE, "method": "eagle", "k": 3, "deploymnet": None})
    assert code == 1
    assert "'deploymnet'" in answers[0]["refused"]["message"]


def test_resolve_runs_equals_each_run_alone(reg):
    """The library's batch with deployments: every answer equals resolve_deployment (or the
    refusal it raises) and resolve for the plain runs, all in one resolve_many."""
    from registry_db.inputs.request import DeploymentRun
    from registry_db.resolve.deployment import resolve_runs

    quiet_cli = request(cli=InlineValue(2, acceptance_rate=0.5))
    runs = [DeploymentRun(request(id=1), MIXED),
            Request("solo", "eagle", 3, "off", "coding", sets=("alpha", "delta")),
            DeploymentRun(quiet_cli, QUIET),
            DeploymentRun(request(cli=InlineValue(3, acceptance_length=2.2)), MIXED),
            DeploymentRun(request(), Deployment((Pool("wide", "eagle", 4),)))]
    got = resolve_runs(reg, runs)
    assert len(got) == len(runs)
    for run_, answer in zip(runs, got):
        if isinstance(run_, DeploymentRun):
            try:
                assert answer == resolve_deployment(reg, run_.request, run_.deployment)
            except ResolutionRefused as refused:
                assert answer == refused.refusal
        else:
            assert answer == resolve(reg, run_)
