"""The registry on the web: Datasette's metadata for a registry's SQLite file.

Every description is the catalog's (:mod:`registry_db.store.catalog`, the words of
``docs/schema.md`` and of PostgreSQL's comments); beside them, the facets and sort orders of
each page and the analysts' canned queries. "Resolve a run" is the registry layer's own
statement (:func:`registry_db.resolve.statements.answer_statement`, the one PostgreSQL's
``registry_resolve`` runs) on the form's fields, with the words of its answer around it.

Nothing here imports Datasette (``registry serve --metadata`` prints this without it); the
pictures are :mod:`registry_db.analyze.web_plugin`'s.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from registry_db.resolve.statements import LIVE_SETS, answer_statement
from registry_db.store.catalog import RELATIONS, VIEWS, plain_text

TITLE = "Acceptance-profile registry"
DESCRIPTION = (
    "Speculative-decoding acceptance profiles: the acceptance length (AL) each model, method, "
    "K, thinking mode and workload category reaches, with where it was measured. Read-only. "
    "Start with the view acceptance_profiles, or ask the canned query \"Resolve a run\" what "
    "registry resolve would answer.")

#: The columns a page needs for its picture (AL against K); category and profile_set are used
#: when present.
PICTURE_COLUMNS = ("model", "speculative_method", "num_spec_tokens", "thinking",
                   "acceptance_length", "method")


class Page(NamedTuple):
    """How Datasette shows one table or view: its facets and its default order."""

    facets: tuple[str, ...] = ()
    sort: str | None = None
    descending: bool = False


_KEY_FACETS = ("model", "speculative_method", "thinking", "category")
PAGES: dict[str, Page] = {
    "acceptance_profiles": Page((*_KEY_FACETS, "method", "profile_set"), "profile"),
    "profile_conflicts": Page(_KEY_FACETS, "set_count", descending=True),
    "profile_rates_long": Page(_KEY_FACETS, "profile_id"),
    "provenance_details": Page(("hardware", "benchmark", "setting_name"), "provenance_id"),
    "profile_coverage": Page((*_KEY_FACETS, "set_count"), "model"),
    "set_revisions": Page(("profile_set", "action"), "imported_at", descending=True),
    "profile_history": Page(("profile_set", *_KEY_FACETS, "is_current"), "valid_from",
                            descending=True),
    "set_overview": Page((), "profile_set"),
    "profiles": Page(_KEY_FACETS, "id"),
    "revisions": Page(("set_name", "action"), "imported_at", descending=True),
    "labels": Page((), "name"),
    "label_events": Page(("name", "action"), "id", descending=True),
}

# --- resolve a run ----------------------------------------------------------------------------

#: The form of "resolve a run", in its order: the resolver's terms (``set``: one set, or every
#: set when empty; ``fallback``: the pin's fallback_category, none when empty; ``hardware``:
#: the run's chip; ``as_of``: the registry as of that time, ISO 8601, to the millisecond).
RESOLVE_PARAMETERS = ("model", "method", "k", "thinking", "category", "fallback", "set",
                      "hardware", "as_of")

#: The form's time, read by SQLite (``Z``, ``+HH:MM`` or no zone: UTC) and written as the
#: resolver binds a time (:func:`registry_db.resolve.lookup.bound`: microseconds, no zone).
_MOMENT = "(SELECT at FROM moment)"


#: The form's fields in the registry layer's statement (:func:`answer_statement`): a field left
#: empty is a term not given (null); the time is read as :data:`_MOMENT` says; the form names
#: one set at most (``sets`` null).
FORM_TERMS = {"k": "CAST(:k AS INTEGER)", "thinking": "NULLIF(:thinking, '')",
              "category": "NULLIF(:category, '')", "fallback": "NULLIF(:fallback, '')",
              "set": "NULLIF(:set, '')", "hardware": "NULLIF(:hardware, '')",
              "as_of": _MOMENT, "sets": "NULL"}


def answer_on_form() -> str:
    """The registry layer's own statement (``registry_resolve.sql``, the body of PostgreSQL's
    ``registry_resolve``), its parameters the form's fields (:data:`FORM_TERMS`)."""
    return re.sub(r":(\w+)", lambda m: FORM_TERMS.get(m.group(1), m.group(0)),
                  answer_statement("sqlite"))


#: Around the registry layer's answer, the form's checks (the refusals the resolver makes before
#: any lookup) and the words of its answer, as one row.
_RESOLVE = """WITH RECURSIVE moment AS (
    SELECT CASE WHEN :as_of = '' THEN NULL
                ELSE strftime('%Y-%m-%d %H:%M:%f', :as_of) || '000' END AS at,
           CASE WHEN :as_of = '' THEN ''
                ELSE ' as of ' || strftime('%Y-%m-%dT%H:%M:%S', :as_of)
                     || CASE WHEN strftime('%f', :as_of) LIKE '%.000' THEN ''
                             ELSE substr(strftime('%f', :as_of), 3) || '000' END
                     || 'Z' END AS said
),
-- The registry layer's own answer (registry_resolve.sql), on the form's fields.
answer AS (
{answer}
),
-- The sets of the registry as of the form's time.
live AS (
{live}
),
-- The profile used, as the words below read it.
one AS (
    SELECT category_used AS category, value_method AS method, copied_from,
           measured_on AS hardware, hardware_mismatch, profile_set, revision,
           acceptance_length, acceptance_rate, per_position_rates, rates_derived,
           fallback_replaced, fallback_used, al_stderr, al_stderr_exact AS stderr_exact,
           drafts, source
    FROM answer WHERE reason IS NULL
),
terms AS (
    SELECT CASE
        WHEN :model = '' OR :method = '' THEN 'model and method are required'
        WHEN NOT (CAST(:k AS INTEGER) >= 1 AND CAST(CAST(:k AS INTEGER) AS TEXT) = trim(:k))
            THEN 'K is a whole number, at least 1'
        WHEN :thinking NOT IN ('', 'on', 'off') THEN 'thinking is on or off'
        WHEN :as_of <> '' AND (strftime('%f', :as_of) IS NULL OR NOT :as_of GLOB
                '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*')
            THEN 'as_of: ''' || :as_of || ''' is not an ISO 8601 time such as '
                 || '2026-11-30T12:00:00Z (no zone means UTC)'
        WHEN :as_of GLOB '*[.,][0-9][0-9][0-9][0-9]*'
            THEN 'as_of: the form reads a time to the millisecond'
    END AS invalid,
    (SELECT reason FROM answer) = 'unknown_set' AS unknown_set,
    CASE WHEN :set = '' THEN 'the registry (every set)'
         ELSE 'the registry sets ''' || :set || '''' END
        || (SELECT said FROM moment) AS scope,
    :model || '/' || :method || '/k' || trim(:k) || '/thinking-' || :thinking || '/'
        AS prefix
),
decided AS (
    SELECT CASE WHEN t.invalid IS NOT NULL THEN 'invalid_request'
                ELSE COALESCE(a.reason, 'resolved') END AS answer,
           t.*, a.category_used AS used, a.set_count, a.conflict_sets
    FROM terms t, answer a
)
SELECT
    d.answer,
    CASE d.answer
        WHEN 'invalid_request' THEN d.invalid
        WHEN 'unknown_set' THEN 'no profile set named ''' || :set || '''; known sets: '
            || COALESCE((SELECT group_concat(name, ', ') FROM (
                SELECT name FROM profile_sets WHERE :as_of = ''
                UNION SELECT set_name FROM live ORDER BY 1 LIMIT 20)), 'none')
            || (SELECT said FROM moment)
        WHEN 'no_thinking' THEN 'the registry lookup needs the workload''s thinking mode '
            || '(on or off) and none was given'
        WHEN 'no_category' THEN 'the registry lookup needs the workload''s category and none '
            || 'was given, nor a fallback_category'
        WHEN 'no_match' THEN 'no profile ' || d.prefix || :category || ' in ' || d.scope
            || ', and no fallback_category was requested'
        WHEN 'fallback_no_match' THEN CASE WHEN :category = ''
            THEN 'the workload states no category'
            ELSE 'the workload''s category ''' || :category || ''' has no profile' END
            || ' in ' || d.scope || ', and the fallback has no profile either: no '
            || d.prefix || :fallback
        WHEN 'conflict' THEN d.set_count || ' registry sets hold ' || d.prefix || d.used
            || ': ' || d.conflict_sets || '; name one with set'
        -- the resolver's notes in its order, each after '; ' (the first one's cut off)
        ELSE NULLIF(substr(
            CASE WHEN o.category <> :category THEN '; ' || CASE WHEN :category = ''
                THEN 'the workload states no category'
                ELSE 'the workload''s category ''' || :category || ''' has no profile' END
                || '; used the fallback category ''' || o.category || '''' ELSE '' END
            -- chip names compared without case, as the resolver does
            || CASE WHEN o.hardware_mismatch
                THEN '; the profile was measured on ' || o.hardware || ' and the run is on '
                     || :hardware || '; acceptance is reused across hardware' ELSE '' END
            || CASE WHEN o.method = 'measured' THEN ''
                ELSE '; the profile''s value is not measured ('
                    || COALESCE('copied from ' || o.copied_from, o.method) || ')' END, 3), '')
    END AS message,
    CASE WHEN d.answer = 'resolved' OR d.answer = 'conflict' THEN d.prefix || d.used END
        AS profile,
    o.acceptance_length,
    o.acceptance_rate,
    o.per_position_rates,
    o.rates_derived,
    CASE WHEN d.answer = 'conflict' THEN d.conflict_sets ELSE o.profile_set END AS profile_set,
    o.revision,
    o.fallback_replaced,
    o.fallback_used AS fallback_category,
    o.al_stderr,
    CASE WHEN o.al_stderr IS NOT NULL THEN o.stderr_exact END AS al_stderr_exact,
    o.drafts,
    o.acceptance_length - 1.96 * o.al_stderr AS al_low_95,
    o.acceptance_length + 1.96 * o.al_stderr AS al_high_95,
    o.method,
    o.source,
    o.hardware AS measured_on,
    NULLIF(:hardware, '') AS run_on,
    (SELECT NULLIF(substr(said, 8), '') FROM moment) AS as_of,
    :model AS model,
    :method AS speculative_method,
    CASE WHEN d.invalid IS NULL THEN CAST(:k AS INTEGER) END AS num_spec_tokens,
    :thinking AS thinking,
    d.used AS category
FROM decided d LEFT JOIN one o ON d.answer = 'resolved'
-- An empty form (the page as first opened) asks nothing: no row, no error.
WHERE :model <> '' OR :method <> '' OR :k <> '' OR :thinking <> '' OR :category <> ''
   OR :fallback <> '' OR :set <> '' OR :hardware <> '' OR :as_of <> ''"""


#: The answer row's columns, in order, and what each says (the page shows them beside it).
RESOLVE_COLUMNS: dict[str, str] = {
    "answer": "resolved, or why the run is refused: invalid_request, unknown_set, no_thinking, "
              "no_category, no_match, fallback_no_match or conflict (registry resolve's "
              "reasons).",
    "message": "Why, in words: the refusal's message, or the resolution's warnings (a "
               "fallback category used, a value not measured).",
    "profile": "The profile used (for a conflict: the key the sets share), as "
               "model/method/k<K>/thinking-<mode>/category.",
    "acceptance_length": "AL as stored. Unit: tokens per step.",
    "acceptance_rate": "(AL − 1) / K. Unit: probability.",
    "per_position_rates": "p_1 … p_K: stored, or derived from AL by the minimum-variance "
                          "schedule. Unit: probability.",
    "rates_derived": "1 when the rates were derived, 0 when stored.",
    "profile_set": "The set that holds the profile (for a conflict: every set that does).",
    "revision": "The set's revision that holds it.",
    "fallback_replaced": "The workload's category that had no profile (empty when the "
                         "workload stated none).",
    "fallback_category": "The fallback category used in its place.",
    "al_stderr": "The AL's standard error, from the profile's counts (empty without counts). "
                 "Unit: tokens per step.",
    "al_stderr_exact": "1 when the stderr is exact (per-position counts, or K 1), 0 when it "
                       "is the largest the totals allow.",
    "drafts": "The verification steps the counts cover.",
    "al_low_95": "AL − 1.96 stderr: the low end of a 95% interval. Unit: tokens per step.",
    "al_high_95": "AL + 1.96 stderr: the high end of a 95% interval. Unit: tokens per step.",
    "method": "How the value was obtained: measured, literature, vendor_spec, copied or "
              "assumed.",
    "source": "provenance.source: the document the value was read from.",
    "measured_on": "provenance.hardware: the chip it was measured on.",
    "run_on": "The run's chip, as the form gave it (a chip other than measured_on is said "
              "in the message).",
    "as_of": "The time the registry was read as of (UTC), when the form gave one.",
    "model": "The run's model.",
    "speculative_method": "The run's speculative method.",
    "num_spec_tokens": "The run's K. Unit: tokens.",
    "thinking": "The run's thinking mode.",
    "category": "The category of the profile used: the workload's, or the fallback.",
}


def resolve_sql() -> str:
    """"Resolve a run": the resolver's statement and its decision, one answer row."""
    return _RESOLVE.format(answer=answer_on_form(), live=LIVE_SETS.format(at=_MOMENT))


# --- the other canned queries -----------------------------------------------------------------

_COVERAGE = """SELECT model, speculative_method, thinking, category, num_spec_tokens,
       CASE WHEN set_count = 0 THEN 'missing' WHEN set_count = 1 THEN 'stored'
            ELSE 'conflict' END AS status,
       profile_set, acceptance_length, method, set_count
FROM profile_coverage
WHERE model = :model AND (:method = '' OR speculative_method = :method)
ORDER BY speculative_method, thinking, category, num_spec_tokens, profile_set"""

_HISTORY = """SELECT revision, action, imported_at, profile_count, caveat_count, message,
       source_file, content_hash, is_latest, git_commit, git_dirty, git_path
FROM set_revisions
WHERE profile_set = :set
ORDER BY revision DESC"""

_CONFLICTS = """SELECT c.model, c.speculative_method, c.num_spec_tokens, c.thinking, c.category,
       c.set_count, p.profile_set, p.acceptance_length, p.method, p.source, p.hardware,
       p.imported_at
FROM profile_conflicts c
JOIN acceptance_profiles p
  ON p.model = c.model AND p.speculative_method = c.speculative_method
 AND p.num_spec_tokens = c.num_spec_tokens AND p.thinking = c.thinking
 AND p.category = c.category
ORDER BY c.model, c.speculative_method, c.num_spec_tokens, c.thinking, c.category,
         p.profile_set"""

_UNCERTAINTY = """SELECT profile, profile_set, model, speculative_method, num_spec_tokens, thinking,
       category, acceptance_length, al_stderr, al_stderr_exact,
       acceptance_length - 1.96 * al_stderr AS al_low_95,
       acceptance_length + 1.96 * al_stderr AS al_high_95,
       drafts, draft_tokens, accepted_tokens, method, source
FROM acceptance_profiles
WHERE (:model = '' OR model = :model) AND drafts IS NOT NULL
ORDER BY model, speculative_method, thinking, category, num_spec_tokens, profile_set"""


class Canned(NamedTuple):
    """One canned query: its page's name, title, description, SQL and form."""

    name: str
    title: str
    description: str
    sql: str
    params: tuple[str, ...] = ()
    hide_sql: bool = False


def canned_queries() -> tuple[Canned, ...]:
    """The analysts' questions, as Datasette's canned queries."""
    queries = [
        Canned("resolve", "Resolve a run",
               "What registry resolve answers for a run, and why: the profile it uses (with "
               "the fallback category when the workload's had none), or the refusal and its "
               "reason. The resolver's own statement decides. model, method, k and thinking "
               "(on or off) are the run's; category is the workload's; fallback is the "
               "scenario's fallback_category (empty: none); set restricts the registry to one "
               "set (empty: every set); hardware is the run's chip; as_of reads the registry "
               "as of a time (ISO 8601, e.g. 2026-11-30T12:00:00Z; empty: now). With counts, "
               "the answer gives the AL's standard error and a 95% interval.", resolve_sql(),
               RESOLVE_PARAMETERS, hide_sql=True),
        Canned("coverage", "Coverage of a model",
               "Every cell of a model's grid (method, thinking mode, category, K from 1 to the "
               "largest stored): stored, missing (a run there is refused or falls back) or a "
               "conflict (two sets hold it). method is optional.", _COVERAGE,
               ("model", "method")),
        Canned("set_history", "History of a set",
               "Every revision of a set, newest first: each import that added or changed it, "
               "and its deletion.", _HISTORY, ("set",)),
        Canned("conflicts", "Conflicts",
               "Profile keys that two or more sets hold, one row per set holding each: the "
               "resolver refuses these runs (conflict) until one set drops the key or the run "
               "names a set.", _CONFLICTS),
    ]
    # The counts columns come with their migration; until the catalog has them, no query.
    if "al_stderr" in VIEWS["acceptance_profiles"].column_names:
        queries.append(Canned(
            "uncertainty", "Values with their uncertainty",
            "Profiles with raw counts: AL with its standard error (exact with per-position "
            "counts or at K = 1, else an upper bound) and a 95% interval, AL ± 1.96 stderr. "
            "model is optional.", _UNCERTAINTY, ("model",)))
    return tuple(queries)


def _page(name: str) -> dict[str, Any]:
    relation = RELATIONS[name]
    out: dict[str, Any] = {
        "description": plain_text(relation.summary),
        "columns": {c.name: plain_text(c.meaning, c.unit) for c in relation.columns},
    }
    if relation.kind == "table":
        # The database's page leads with the questions and the views, the analysts' surface;
        # the tables (the implementation) are listed under its "hidden tables", open as ever.
        out["hidden"] = True
    page = PAGES.get(name)
    if page is not None:
        if page.facets:
            out["facets"] = list(page.facets)
        if page.sort:
            out["sort_desc" if page.descending else "sort"] = page.sort
    return out


def metadata(database: str) -> dict[str, Any]:
    """Datasette's metadata for the registry served as ``database`` (its file's stem)."""
    queries: dict[str, Any] = {}
    for q in canned_queries():
        entry: dict[str, Any] = {"title": q.title, "description": q.description, "sql": q.sql}
        if q.params:
            entry["params"] = list(q.params)
        if q.hide_sql:
            entry["hide_sql"] = True
        queries[q.name] = entry
    return {
        "title": TITLE,
        "description": DESCRIPTION,
        "databases": {database: {
            "description": DESCRIPTION,
            "tables": {name: _page(name) for name in RELATIONS},
            "queries": queries,
        }},
    }


# --- the picture of a page's rows -------------------------------------------------------------

#: The most rows a page's picture draws (Datasette's own limit on a page's rows, 1,000).
MAX_PICTURE_ROWS = 1000


def check_picture(columns: list[str], rows: list[Any]) -> None:
    """Refuse, before anything is drawn, rows a picture cannot hold: too many, or a K past the
    spec's (any SQL can name a K of ten million); the figure's own bounds follow
    (:func:`registry_db.analyze.plot.check_size`)."""
    from registry_db.analyze.plot import MAX_K, PictureTooLarge

    if len(rows) > MAX_PICTURE_ROWS:
        raise PictureTooLarge(f"{len(rows)} rows are more than a picture draws (at most "
                              f"{MAX_PICTURE_ROWS}); narrow the rows")
    at = columns.index("num_spec_tokens")
    big = max((r[at] for r in rows if isinstance(r[at], int)), default=0)
    if big > MAX_K:
        raise PictureTooLarge(f"K {big} is more than a picture draws (K is at most {MAX_K}); "
                              "narrow the rows")


def can_picture(columns: Any) -> bool:
    """Whether rows with these columns can be drawn (AL against K)."""
    return set(PICTURE_COLUMNS) <= set(columns or ())


def picture_png(columns: list[str], rows: list[Any]) -> bytes:
    """The AL-against-K chart of ``rows`` (a page's rows, with :data:`PICTURE_COLUMNS`), drawn
    by ``registry plot``'s own code, as PNG bytes. Rows without an AL draw nothing; a row
    held by several sets draws one line per set, as ``registry plot`` does."""
    import io

    from registry_db.analyze import plot

    check_picture(columns, rows)
    fig = plot.build_figure(_coverage(columns, rows))
    buffer = io.BytesIO()
    # No date or version in the file, as plot.save_figure: the same rows, the same bytes.
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _coverage(columns: list[str], rows: list[Any]) -> Any:
    """Rows as the grid :mod:`registry_db.analyze.plot` draws."""
    from registry_db.analyze.coverage import Cell, Coverage, Entry, Row, Selection

    grid: dict[tuple[str, str, str, str], dict[int, dict[str, Entry]]] = {}
    for values in rows:
        row = dict(zip(columns, values))
        key = (str(row["model"]), str(row["speculative_method"]), str(row["thinking"]),
               str(row.get("category") or ""))
        cells = grid.setdefault(key, {})
        al, k = row["acceptance_length"], row["num_spec_tokens"]
        if isinstance(al, (int, float)) and isinstance(k, int) and k >= 1:
            holder = str(row.get("profile_set") or "")
            cells.setdefault(k, {})[holder] = Entry(holder, float(al), str(row["method"]))
    max_k = max((k for cells in grid.values() for k in cells), default=1)
    out = tuple(Row(*key, cells=tuple(
        Cell(k, tuple(v for _, v in sorted(cells.get(k, {}).items())))
        for k in range(1, max_k + 1))) for key, cells in sorted(grid.items()))
    used = sorted({e.profile_set for r in out for c in r.cells for e in c.entries
                   if e.profile_set})
    return Coverage(selection=Selection(), max_k=max_k, rows=out, sets=tuple(used))
