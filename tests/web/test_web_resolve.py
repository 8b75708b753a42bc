""""Resolve a run", the canned query, answers as ``registry resolve`` does: the same profile or
the same refusal, on generated registries with several sets, conflicts and fallbacks."""

from __future__ import annotations

import itertools
import json
import re
import sqlite3

import pytest

from registry_db.analyze import web
from registry_db.resolve.statements import answer_statement, named_one_statement
from tests.helpers import (
    WEB_CATEGORIES,
    WEB_KS,
    WEB_METHODS,
    WEB_MODELS,
    WEB_SETS,
    WEB_THINKING,
    make_registry,
    run_cli,
    web_sets,
)

#: The form's values swept: every term given or left empty, a category nothing holds, an
#: unknown set.
FORMS = [dict(zip(web.RESOLVE_PARAMETERS, (*values, "", ""))) for values in itertools.product(
    WEB_MODELS, WEB_METHODS, [str(k) for k in WEB_KS], (*WEB_THINKING, ""),
    (*WEB_CATEGORIES, "", "none"), ("", "coding", "chat"), ("", *WEB_SETS, "nope"))]


def _request(form: dict[str, str]) -> dict:
    """The form as a ``registry resolve --batch`` line: an empty field is a term not given."""
    line: dict = {"model": form["model"], "method": form["method"], "k": int(form["k"])}
    for term in ("thinking", "category"):
        if form[term]:
            line[term] = form[term]
    if form["fallback"]:
        line["pin"] = {"fallback_category": form["fallback"]}
    if form["set"]:
        line["sets"] = [form["set"]]
    for term in ("hardware", "as_of"):
        if form.get(term):
            line[term] = form[term]
    return line


def _canned(path, forms: list[dict[str, str]]) -> list[dict]:
    """The canned query's answer row for each form, bound as Datasette binds a form: text."""
    sql = web.resolve_sql()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        out = []
        for form in forms:
            (row,) = conn.execute(sql, form).fetchall()
            out.append(dict(row))
        return out
    finally:
        conn.close()


def _library(path, forms: list[dict[str, str]], tmp_path) -> list[dict]:
    """``registry resolve --batch`` on the same registry, one answer per form."""
    batch = tmp_path / "runs.jsonl"
    batch.write_text("".join(json.dumps(_request(f)) + "\n" for f in forms), encoding="utf-8")
    result = run_cli("-d", str(path), "resolve", "--batch", str(batch), "--json")
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.output.splitlines()]


def _same(form: dict, mine: dict, theirs: dict) -> None:
    where = f"{form} -> {mine}"
    if "refused" in theirs:
        refused = theirs["refused"]
        assert mine["answer"] == refused["reason"], (where, refused)
        said = mine["message"]
        if refused["reason"] == "conflict":
            # The library names the flag (--set); the page names its field.
            assert refused["message"].startswith(said.removesuffix("set")), (where, refused)
        elif refused["reason"] == "unknown_set":
            assert f"no profile set named '{form['set']}'" in said, where
            if not form.get("as_of"):
                assert "known sets: alpha, beta, gamma" in said, where
        else:
            # The library goes on to say what is stored for the model and method.
            assert refused["message"].startswith(said), (where, refused)
        return
    assert mine["answer"] == "resolved", (where, theirs)
    assert mine["profile"] == theirs["profile"], where
    assert mine["profile_set"] == theirs["profile_set"], where
    assert mine["revision"] == theirs["revision"], where
    assert mine["acceptance_length"] == theirs["acceptance_length"], where
    assert mine["acceptance_rate"] == theirs["acceptance_rate"], where
    assert json.loads(mine["per_position_rates"]) == pytest.approx(
        theirs["per_position_rates"], abs=1e-12), where
    assert bool(mine["rates_derived"]) is theirs["rates_derived"], where
    fallback = theirs["fallback"] or {}
    assert mine["fallback_replaced"] == fallback.get("replaced"), where
    assert mine["fallback_category"] == fallback.get("category"), where
    assert mine["source"] == theirs["source"], where
    assert mine["message"] == ("; ".join(theirs["warnings"]) or None), where
    u = theirs["uncertainty"] or {}
    assert mine["al_stderr"] == u.get("stderr"), where
    assert mine["drafts"] == u.get("drafts"), where
    assert (None if mine["al_stderr_exact"] is None else bool(mine["al_stderr_exact"])) \
        == u.get("exact"), where


@pytest.mark.parametrize("seed", [7, 11, 23])
def test_the_canned_query_answers_as_registry_resolve(tmp_path, seed):
    path = make_registry(tmp_path, seed)
    mine, theirs = _canned(path, FORMS), _library(path, FORMS, tmp_path)
    assert len(mine) == len(theirs) == len(FORMS)
    for form, a, b in zip(FORMS, mine, theirs):
        _same(form, a, b)
    # The sweep reaches every kind of answer the form can get.
    reached = {a["answer"] for a in mine}
    assert reached == {"resolved", "conflict", "no_match", "fallback_no_match", "no_thinking",
                       "no_category", "unknown_set"}
    assert any(a["fallback_category"] for a in mine)
    assert {a["rates_derived"] for a in mine if a["answer"] == "resolved"} == {0, 1}


def test_the_answer_row_has_the_columns_the_page_explains(registry_file):
    conn = sqlite3.connect(f"file:{registry_file}?mode=ro", uri=True)
    try:
        cur = conn.execute(web.resolve_sql(), dict.fromkeys(web.RESOLVE_PARAMETERS, ""))
        assert [d[0] for d in cur.description] == list(web.RESOLVE_COLUMNS)
    finally:
        conn.close()


def test_the_canned_query_holds_the_registry_layers_own_statement():
    """Not a copy: the statement PostgreSQL's registry_resolve and registry_resolve.sql run
    (which holds the resolver's one-run lookups), its parameters the form's fields."""
    sql = web.resolve_sql()
    answer = answer_statement("sqlite")
    assert web.answer_on_form() in sql
    assert re.sub(r":(\w+)", lambda m: web.FORM_TERMS.get(m.group(1), m.group(0)),
                  answer) == web.answer_on_form()
    for scoped in (0, 1):
        for as_of in (False, True):
            assert named_one_statement("sqlite", scoped, as_of).replace(
                "IN (:set_1)", "IN (SELECT name FROM named)") in answer


def test_bad_form_values_are_said_to_be_bad(registry_file):
    forms = [
        {**dict.fromkeys(web.RESOLVE_PARAMETERS, ""), "model": "model-a", "method": "mtp",
         "k": k, "thinking": "on", "category": "coding"} for k in ("0", "two", "1.5", "")]
    forms.append({**forms[0], "k": "2", "thinking": "maybe"})
    forms.append({**forms[0], "k": "2", "model": ""})
    answers = _canned(registry_file, forms)
    assert [a["answer"] for a in answers] == ["invalid_request"] * len(forms)
    assert [a["message"] for a in answers] == (
        ["K is a whole number, at least 1"] * 4
        + ["thinking is on or off", "model and method are required"])


def test_an_empty_form_asks_nothing(registry_file):
    """The page as first opened: no answer row, so no red invalid_request."""
    conn = sqlite3.connect(f"file:{registry_file}?mode=ro", uri=True)
    try:
        rows = conn.execute(web.resolve_sql(), dict.fromkeys(web.RESOLVE_PARAMETERS, ""))
        assert rows.fetchall() == []
    finally:
        conn.close()


def _history(tmp_path) -> tuple[object, str]:
    """A registry whose sets alpha and beta have a second revision with other values, and a
    time between the two imports (to the millisecond, as the form reads it)."""
    from datetime import datetime, timedelta

    path = make_registry(tmp_path, 7)
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        (last,) = conn.execute("SELECT MAX(imported_at) FROM revisions").fetchone()
    finally:
        conn.close()
    between = datetime.fromisoformat(last) + timedelta(milliseconds=1)
    newer = tmp_path / "newer"
    newer.mkdir()
    for name, content in web_sets(8).items():
        if name in ("alpha", "beta"):
            (newer / f"{name}.yaml").write_text(content, encoding="utf-8")
    result = run_cli("-d", str(path), "import", str(newer))
    assert result.exit_code == 0, result.stderr
    return path, between.strftime("%Y-%m-%dT%H:%M:%S.%f")[:23] + "Z"


def test_hardware_and_as_of_answer_as_registry_resolve(tmp_path):
    path, between = _history(tmp_path)
    forms = [dict(zip(web.RESOLVE_PARAMETERS, values)) for values in itertools.product(
        WEB_MODELS, WEB_METHODS, [str(k) for k in WEB_KS], WEB_THINKING, ("coding", "chat"),
        ("", "coding"), ("", "alpha", "gamma", "nope"), ("", "B300"),
        ("", "2000-01-01", between, "2999-01-01T00:00:00Z"))]
    mine, theirs = _canned(path, forms), _library(path, forms, tmp_path)
    assert len(mine) == len(theirs) == len(forms)
    for form, a, b in zip(forms, mine, theirs):
        _same(form, a, b)
    resolved = [(f, a) for f, a in zip(forms, mine) if a["answer"] == "resolved"]
    # The sweep reaches both revisions, a chip other than the profile's, and counts.
    assert {a["revision"] for f, a in resolved if f["as_of"] == between} == {1}
    assert {a["revision"] for f, a in resolved if f["as_of"] == ""} == {1, 2}
    assert any("measured on h200 and the run is on B300" in (a["message"] or "")
               for _, a in resolved)
    assert any(a["al_stderr"] is not None for _, a in resolved)
    assert all(a["answer"] in ("no_match", "fallback_no_match", "unknown_set")
               for f, a in zip(forms, mine) if f["as_of"] == "2000-01-01")


def test_bad_times_are_said_to_be_bad(registry_file):
    base = {**dict.fromkeys(web.RESOLVE_PARAMETERS, ""), "model": "model-a", "method": "mtp",
            "k": "2", "thinking": "on", "category": "coding"}
    answers = _canned(registry_file, [{**base, "as_of": t} for t in (
        "yesterday", "now", "2026-13-45", "12:00", "2026-11-30T12:00:00.1234Z")])
    assert [a["answer"] for a in answers] == ["invalid_request"] * 5
    assert all(a["message"].startswith("as_of: ") for a in answers)
