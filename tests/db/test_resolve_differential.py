"""One answer whichever way a run is asked: the Python resolver's set-based batch
(``resolve_many``), the registry layer's statement as SQLite's ``registry_resolve.sql`` runs
it, PostgreSQL's ``registry_resolve_many`` and ``registry_resolve``, and the canned query
"Resolve a run", over a random grid of 20,000 runs a backend: hits, fallbacks, conflicts,
misses, every refusal the registry layer makes, a chip on another profile's, runs in several
sets (a conflict between them, an unknown one), and the registry as of four times of a history
that imports, changes, deletes and adds sets."""

from __future__ import annotations

import json
import re
import sqlite3

import psycopg

from registry_db.analyze import web
from registry_db.errors import ResolutionRefused
from registry_db.model import Pin, Refusal
from registry_db.resolve import plan
from registry_db.resolve.answer import Resolution
from registry_db.resolve.lookup import bound
from registry_db.resolve.plan import Request, resolve, resolve_many
from registry_db.resolve.statements import ANSWER_COLUMNS, sqlite_file
from tests.helpers import differential_history, differential_runs, scope_of

#: Runs per backend.
RUNS = 20_000
COLUMNS = [name for name, _ in ANSWER_COLUMNS]


def _request(run: dict) -> Request:
    return Request(run["model"], run["method"], run["k"], run["thinking"], run["category"],
                   pin=None if run["fallback"] is None else Pin(
                       fallback_category=run["fallback"]),
                   hardware=run["hardware"],
                   sets=scope_of(run), as_of=run["as_of"])


def _from_library(answer: Resolution | Refusal) -> tuple:
    """The library's answer in the terms every other way gives it."""
    if type(answer) is Refusal:
        said = None
        if answer.reason == "conflict":
            count, names = re.search(r"^(\d+) registry sets hold \S+: (.*?); name one",
                                     answer.message).groups()
            said = (int(count), names)
        elif answer.reason in ("no_match", "fallback_no_match"):
            # (the one-run path may add the nearest stored model or method)
            held = re.search(r"; stored for \S+ there: (.*?)(; did you mean .*)?$",
                             answer.message)
            said = held.group(1) if held else None
            assert held or re.search(r" there(; did you mean .*)?$", answer.message), \
                answer.message
        return ("refused", str(answer.reason), said)
    fb, hw, u, c = answer.fallback, answer.hardware_mismatch, answer.uncertainty, answer.counts
    return ("resolved", answer.profile, answer.acceptance_length, answer.acceptance_rate,
            answer.num_spec_tokens, tuple(answer.per_position_rates), answer.rates_derived,
            answer.profile_set, answer.revision, answer.source,
            None if fb is None else (fb.replaced, fb.category),
            None if hw is None else hw.measured_on,
            None if u is None else (u.drafts, u.stderr, u.exact),
            None if c is None else json.dumps(c.to_json(), sort_keys=True),
            tuple(w for w in answer.warnings if "not measured" in w))


def _from_row(row: dict, run: dict) -> tuple:
    """A row of the registry layer's answer (either database) in the same terms."""
    if row["outcome"] == "refused":
        said = None
        if row["reason"] == "conflict":
            said = (row["set_count"], row["conflict_sets"])
        elif row["reason"] in ("no_match", "fallback_no_match"):
            said = row["stored"]
        return ("refused", row["reason"], said)
    counts = None
    if row["drafts"] is not None:
        counts = {"drafts": row["drafts"], "draft_tokens": row["draft_tokens"],
                  "accepted_tokens": row["accepted_tokens"]}
        if row["accepted_per_position"] is not None:
            counts["accepted_per_position"] = json.loads(row["accepted_per_position"])
    how = row["copied_from"] and f"copied from {row['copied_from']}" or row["value_method"]
    return ("resolved", row["profile"], row["acceptance_length"], row["acceptance_rate"],
            row["num_spec_tokens"], tuple(float(r) for r in json.loads(
                row["per_position_rates"])), bool(row["rates_derived"]),
            row["profile_set"], row["revision"], row["source"],
            None if row["fallback_used"] is None else (row["fallback_replaced"],
                                                       row["fallback_used"]),
            row["measured_on"] if row["hardware_mismatch"] else None,
            None if counts is None else (row["drafts"], row["al_stderr"],
                                         bool(row["al_stderr_exact"])),
            None if counts is None else json.dumps(counts, sort_keys=True),
            () if row["value_method"] == "measured" else (
                f"the profile's value is not measured ({how})",))


def _sqlite_rows(path: str, runs: list[dict]) -> list[dict]:
    """registry_resolve.sql's text, run by Python's sqlite3 on a read-only connection."""
    statement = sqlite_file()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out = []
        for run in runs:
            given = dict(run, as_of=None if run["as_of"] is None else bound(run["as_of"],
                                                                              "sqlite"),
                         sets=None if run["sets"] is None else json.dumps(run["sets"]))
            (row,) = conn.execute(statement, given).fetchall()
            out.append(dict(zip(COLUMNS, row)))
        return out
    finally:
        conn.close()


def _pg_rows(url: str, runs: list[dict]) -> list[dict]:
    """PostgreSQL's registry_resolve_many, all runs in one call."""
    given = [{"model": r["model"], "method": r["method"], "k": r["k"],
              "thinking": r["thinking"], "category": r["category"],
              "fallback_category": r["fallback"], "set_name": r["set"],
              "set_names": r["sets"], "hardware": r["hardware"],
              "as_of": None if r["as_of"] is None else r["as_of"].isoformat()} for r in runs]
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        rows = conn.execute("SELECT * FROM registry_resolve_many(%s)",
                            (json.dumps(given),)).fetchall()
        # The one-run function answers as the set-returning one does (a sample).
        for i in range(0, len(runs), 97):
            (one,) = conn.execute(
                "SELECT * FROM registry_resolve(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (runs[i]["model"], runs[i]["method"], runs[i]["k"], runs[i]["thinking"],
                 runs[i]["category"], runs[i]["fallback"], runs[i]["set"],
                 runs[i]["hardware"], runs[i]["as_of"],
                 None if runs[i]["sets"] is None else list(runs[i]["sets"]))).fetchall()
            assert one == rows[i][1:], runs[i]
    assert [r[0] for r in rows] == list(range(len(runs)))
    return [dict(zip(COLUMNS, r[1:])) for r in rows]


def _canned(path: str, runs: list[dict]) -> list[dict]:
    """"Resolve a run" on the form's text fields (the runs it can ask: no chip, no time)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        sql = web.resolve_sql()
        return [dict(conn.execute(sql, {
            "model": r["model"], "method": r["method"], "k": str(r["k"]),
            "thinking": r["thinking"] or "", "category": r["category"] or "",
            "fallback": r["fallback"] or "", "set": (scope_of(r) or ("",))[0],
            "hardware": r["hardware"] or "", "as_of": ""}).fetchone()) for r in runs]
    finally:
        conn.close()


def _canned_terms(row: dict) -> tuple:
    if row["answer"] != "resolved":
        return (row["answer"],)
    return (row["answer"], row["profile"], row["acceptance_length"], row["acceptance_rate"],
            tuple(json.loads(row["per_position_rates"])), bool(row["rates_derived"]),
            row["profile_set"], row["revision"], row["source"], row["fallback_replaced"],
            row["fallback_category"])


def test_every_way_of_asking_gives_one_answer(db_url, engine, backend, tmp_path, monkeypatch):
    times = differential_history(db_url, engine, tmp_path)
    runs = differential_runs(times, RUNS, seed=7 if backend == "sqlite" else 11)
    # The library's own decision: the lookup statement and Python, not registry_resolve_many.
    monkeypatch.setattr(plan, "BY_FUNCTION", False)
    library = [_from_library(a) for a in resolve_many(engine, [_request(r) for r in runs])]
    if backend == "sqlite":
        path = db_url.removeprefix("sqlite:///")
        rows = _sqlite_rows(path, runs)
    else:
        rows = _pg_rows(db_url, runs)
    for run, mine, theirs in zip(runs, library, rows):
        assert mine == _from_row(theirs, run), (run, theirs)
    # The one-run path (registry resolve: the function on PostgreSQL, the statement's form for
    # the run on SQLite) answers as the batch does, on a sample.
    for i in range(0, len(runs), 19):
        try:
            one: Resolution | Refusal = resolve(engine, _request(runs[i]))
        except ResolutionRefused as refused:
            one = refused.refusal
        assert _from_library(one) == library[i], runs[i]

    # The grid reaches every answer the registry layer gives, at every time.
    reached = {(r["reason"] or "resolved") for r in rows}
    assert reached == {"resolved", "conflict", "no_match", "fallback_no_match", "no_thinking",
                       "no_category", "unknown_set"}
    resolved = [r for r in rows if r["outcome"] == "resolved"]
    assert any(r["fallback_used"] for r in resolved)
    assert any(r["hardware_mismatch"] for r in resolved)
    assert {bool(r["rates_derived"]) for r in resolved} == {True, False}
    assert {bool(r["al_stderr_exact"]) for r in resolved if r["drafts"]} == {True, False}
    assert any(r["stored"] for r in rows) and any(
        r["reason"] == "no_match" and r["stored"] is None for r in rows)
    for at in (None, *times[1:]):
        assert any(r["outcome"] == "resolved" for r, run in zip(rows, runs)
                   if run["as_of"] == at), at

    # Runs in several sets reach a conflict between them and an unknown one among them.
    several = [(run, row) for run, row in zip(runs, rows) if len(scope_of(run) or ()) > 1]
    assert {row["reason"] for _, row in several} >= {None, "conflict", "unknown_set",
                                                      "no_match"}

    if backend == "sqlite":  # the canned query: the runs a form can state (one set at most)
        asked = [(run, mine) for run, mine in zip(runs, library)
                 if run["as_of"] is None and len(scope_of(run) or ()) < 2]
        asked += [(dict(run, as_of=None), None) for run in runs[:2000]
                  if len(scope_of(run) or ()) < 2]
        fresh = resolve_many(engine, [_request(run) for run, mine in asked if mine is None])
        answers = iter(_from_library(a) for a in fresh)
        asked = [(run, mine if mine is not None else next(answers)) for run, mine in asked]
        canned = _canned(path, [run for run, _ in asked])
        for (run, mine), row in zip(asked, canned):
            expected = (mine[1],) if mine[0] == "refused" else (
                "resolved", *mine[1:4], mine[5], mine[6], mine[7], mine[8], mine[9],
                *(mine[10] or (None, None)))
            assert _canned_terms(row) == expected, (run, row)
