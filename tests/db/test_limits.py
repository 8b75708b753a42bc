"""Storage limits are input rules (issue 11, item 4): input that a database cannot hold, or that
would cost unbounded memory, is refused by validation with ``FILE:LINE:COL`` and the same message
on both backends, and never reaches the database. Before these rules, PostgreSQL failed with
exit 3 ("integer out of range", "index row size exceeds btree maximum") and SQLite imported it;
a huge K ran the resolver out of memory."""

from __future__ import annotations

import json

import pytest

from registry_db.errors import ResolutionRefused
from registry_db.model import MAX_K, InlineValue
from registry_db.resolve import Request, resolve, resolve_many
from tests.helpers import SEED, run_cli, set_yaml

#: (what is too large, edit of a valid set, the finding's code, line:column, key path)
OVERSIZED = [
    ("K at the 32-bit limit", ("num_spec_tokens: 3", "num_spec_tokens: 2147483647", 1),
     "bad_k", "8:22", "profiles[0].num_spec_tokens"),
    ("a 10,000-character model", ("model: model-a", "model: " + "m" * 10_000, 1),
     "too_long", "6:12", "profiles[0].model"),
    ("a 4,000-character set name", ("name: big", "name: " + "s" * 4_000, 1),
     "bad_name", "2:7", "name"),
    ("a hidden set name", ("name: big", "name: .hidden", 1), "bad_name", "2:7", "name"),
    ("a 5,000-character setting name", ("seed: 7", "? " + "x" * 5_000 + "\n        : 7", 1),
     "too_long", "20:11", "profiles[0].provenance.settings." + "x" * 5_000),
]


def _set(edit: tuple[str, str, int]) -> str:
    text = set_yaml("big", 2).replace("settings: {rejection_sample_method: block, seed: 7}",
                                      "settings:\n        rejection_sample_method: block\n"
                                      "        seed: 7")
    old, new, count = edit
    assert old in text
    return text.replace(old, new, count)


@pytest.mark.parametrize("what,edit,code,where,path", OVERSIZED, ids=[o[0] for o in OVERSIZED])
def test_oversized_input_is_refused_before_the_database(db_url, tmp_path, what, edit, code,
                                                        where, path):
    file = tmp_path / "big.yaml"
    file.write_text(_set(edit), encoding="utf-8")
    result = run_cli("-d", db_url, "import", str(file))
    assert result.exit_code == 1, result.output
    assert f"{file}:{where}: {path}: " in result.stderr
    problems = json.loads(run_cli("-d", db_url, "import", "--json", str(file)).stdout)["problems"]
    assert [(p["code"], f"{p['line']}:{p['column']}") for p in problems
            if p["severity"] == "error"] == [(code, where)]
    assert json.loads(run_cli("-d", db_url, "list", "--json").stdout) == []


def test_the_same_message_on_both_backends(db_url, tmp_path):
    """The message names the limit; it is the validator's, not the database's."""
    file = tmp_path / "big.yaml"
    file.write_text(_set(OVERSIZED[1][1]), encoding="utf-8")
    result = run_cli("-d", db_url, "import", str(file))
    assert result.stderr.splitlines()[0] == (
        f"{file}:6:12: profiles[0].model: model is 10,000 characters long; the registry stores "
        "at most 200")


def test_huge_k_on_the_command_line_is_a_usage_error(db_url):
    result = run_cli("-d", db_url, "resolve", "--model", "m", "--method", "mtp", "--k",
                     "2000000000", "--thinking", "on", "--category", "coding")
    assert result.exit_code == 2
    assert f"K is at most {MAX_K}" in result.stderr
    at_limit = run_cli("-d", db_url, "resolve", "--model", "m", "--method", "mtp", "--k",
                       str(MAX_K), "--thinking", "on", "--category", "coding", "--json")
    assert json.loads(at_limit.stdout)["refused"]["reason"] == "no_match"


def test_batch_line_with_a_huge_k_is_refused_and_the_others_answered(db_url):
    assert run_cli("-d", db_url, "import", str(SEED)).exit_code == 0
    good = {"model": "glm-5.3", "method": "mtp", "k": 3, "thinking": "on", "category": "coding"}
    lines = [good, dict(good, k=2_000_000_000), dict(good, k=10**30),
             dict(good, cli={"num_spec_tokens": 2_000_000_000, "acceptance_length": 2.0}), good]
    result = run_cli("-d", db_url, "resolve", "--batch", "-",
                     input="".join(json.dumps(line) + "\n" for line in lines))
    assert result.exit_code == 1
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert answers[0] == answers[4] and answers[0]["acceptance_length"] == 2.99
    assert answers[1]["refused"] == {
        "reason": "invalid_request",
        "message": f"line 2: k is 2000000000; K is at most {MAX_K}, the most speculative "
                   "tokens the registry stores"}
    assert answers[2]["refused"]["reason"] == "invalid_request"
    assert answers[3]["refused"]["reason"] == "invalid_value"
    assert f"K is at most {MAX_K}" in answers[3]["refused"]["message"]


def test_library_requests_keep_the_limits(engine):
    huge = Request("m", "mtp", 2_000_000_000, "on", "coding")
    with pytest.raises(ResolutionRefused) as info:
        resolve(engine, huge)
    assert info.value.reason == "invalid_request"
    long_model = Request("m" * 10_000, "mtp", 3, "on", "coding",
                         cli=InlineValue(3, acceptance_length=2.0))
    (answer,) = resolve_many(engine, [long_model])
    assert answer.reason == "invalid_request" and "model is 10,000 characters long" in \
        answer.message
