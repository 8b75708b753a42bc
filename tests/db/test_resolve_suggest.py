"""Finding things (issue 28.4): ``resolve`` on a model or method nothing is stored for suggests
the nearest stored one (the matcher ``--set`` and ``delete`` use); shell completion offers the
stored models and methods for ``resolve --model/--method``, silently offering nothing on any
error."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from registry_db.cli.group import main
from registry_db.inputs.schema import nearest
from registry_db.store.read import unknown_set_message
from tests.helpers import build_seed, run_cli

TERMS = ["--k", "5", "--thinking", "off", "--category", "coding"]


@pytest.fixture
def url(shared_url):
    """A registry holding the seed, shared by the tests that only read it."""
    return shared_url("seed", build_seed)


def _refused(url: str, model: str, method: str) -> dict:
    result = run_cli("-d", url, "resolve", "--model", model, "--method", method, *TERMS,
                     "--json")
    assert result.exit_code == 1
    return json.loads(result.stdout)["refused"]


def test_an_unknown_model_suggests_the_nearest_stored_model(url):
    refused = _refused(url, "deepseek-v4.1-flsh", "dspark")
    assert refused["reason"] == "no_match"
    assert refused["message"].endswith("; did you mean model 'deepseek-v4.1-flash'?")
    # The refusal's own "what is stored" text is still there, before it.
    assert "nothing is stored for deepseek-v4.1-flsh/dspark there" in refused["message"]


def test_an_unknown_method_suggests_the_models_nearest_method(url):
    refused = _refused(url, "deepseek-v4.1-flash", "dsprak")
    assert refused["message"].endswith(
        "; did you mean method (for deepseek-v4.1-flash) 'dspark'?")
    text = run_cli("-d", url, "resolve", "--model", "deepseek-v4.1-flash", "--method",
                   "dsprak", *TERMS)
    assert text.stderr.rstrip().endswith("did you mean method (for deepseek-v4.1-flash) "
                                          "'dspark'?")


def test_no_suggestion_when_the_model_and_method_are_stored_or_nothing_is_near(url):
    result = run_cli("-d", url, "resolve", "--model", "deepseek-v4.1-flash", "--method",
                     "dspark", "--k", "5", "--thinking", "off", "--category", "poetry",
                     "--json")
    stored = json.loads(result.stdout)["refused"]  # the model and method are stored
    assert stored["reason"] == "no_match" and "did you mean" not in stored["message"]
    far = _refused(url, "zzzzzzzz", "qqqq")
    assert "did you mean" not in far["message"]


def test_the_suggestion_uses_the_sets_matcher():
    known = ["deepseek-v4.1-flash", "glm-5.3"]
    assert nearest("deepseek-v4.1-flsh", known) == ["deepseek-v4.1-flash"]
    assert "did you mean 'glm-5.3'?" in unknown_set_message("glm-5.4", known)


def _complete(url: str, words: str) -> list[str]:
    result = CliRunner().invoke(main, [], prog_name="registry", env={
        "_REGISTRY_COMPLETE": "bash_complete", "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split(" ")) - 1)})
    return [ln.split(",", 1)[1] for ln in result.output.splitlines() if ln]


def test_completion_offers_stored_models_and_methods_for_resolve(url):
    models = _complete(url, f"registry -d {url} resolve --model deep")
    assert models == ["deepseek-v4.1-flash"]
    methods = _complete(url, f"registry -d {url} resolve --model x --method ds")
    assert methods == ["dspark"]


def test_completion_is_silent_on_a_missing_registry(tmp_path):
    path = tmp_path / "missing.db"
    assert _complete("", f"registry -d {path} resolve --model de") == []
    assert not path.exists()


def test_the_refusal_text_the_suggestion_keys_on_is_the_resolvers(url):
    from registry_db.resolve.suggest import NOTHING_STORED

    assert NOTHING_STORED in _refused(url, "nope", "dspark")["message"]
