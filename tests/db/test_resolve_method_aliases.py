"""``resolve`` with another engine's name of a stored method (SGLang's ``nextn`` for native MTP,
an EAGLE spelt as an engine spells it) is refused as before, but names the stored method.

The names are the engines' own: SGLang's ``--speculative-algorithm`` choices (EAGLE, EAGLE3,
NEXTN, as sgl-project/sglang's ``SpeculativeAlgorithm`` spells them), vLLM's
``speculative_config.method`` values (``deepseek_mtp``) and TensorRT-LLM's ``Eagle3``.
"""

from __future__ import annotations

import json

import pytest

from registry_db.importing import write as importer
from tests.helpers import SEED, run_cli

#: glm-5.3 is stored with method mtp at K 3, thinking on, coding (the seed).
TERMS = ["--model", "glm-5.3", "--k", "3", "--thinking", "on", "--category", "coding"]


@pytest.fixture
def url(engine, db_url):
    importer.import_paths(engine, [SEED])
    return db_url


def _message(url: str, method: str) -> str:
    result = run_cli("-d", url, "resolve", *TERMS, "--method", method, "--json")
    assert result.exit_code == 1
    refused = json.loads(result.stdout)["refused"]
    assert refused["reason"] == "no_match"
    return refused["message"]


@pytest.mark.parametrize("method", ["nextn", "NEXTN", "deepseek_mtp"])
def test_another_engines_name_of_mtp_names_the_stored_method(url, method):
    message = _message(url, method)
    assert f"; method {method!r} is stored as 'mtp' (" in message
    assert ("SGLang's name for native MTP" if method.lower() == "nextn" else
            "vLLM's method name for DeepSeek's native MTP") in message


def test_an_engines_spelling_of_a_stored_name_names_it(url):
    assert _message(url, "MTP").endswith("method 'MTP' is stored as 'mtp'")


def test_a_name_no_table_knows_keeps_the_nearest_match(url):
    assert "did you mean" not in _message(url, "ngram")
    assert _message(url, "mtpp").endswith("did you mean method (for glm-5.3) 'mtp'?")
