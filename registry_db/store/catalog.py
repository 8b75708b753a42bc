"""What analysts can query, described: every table and view, every column, its meaning and unit.

The views' SQL lives only in the migrations (each carries its own copy, so history never changes
under it); this module holds the words. ``docs/schema.md`` embeds :func:`reference_markdown`
between marker comments, and tests hold the three together: the reflected database has exactly
these relations and columns, in this order, and the document shows exactly this text.

``acceptance_profiles`` and ``profile_conflicts`` are the contract's stable surface
(:data:`CONTRACT_COLUMNS` lists the columns it promises); the other views are conveniences that a
later migration may extend.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Column:
    """One column: what it means and, for quantities, its unit."""

    name: str
    meaning: str
    unit: str = ""


@dataclass(frozen=True)
class Relation:
    """A table or view, with its columns in database order."""

    name: str
    kind: str  # "table" or "view"
    summary: str
    columns: tuple[Column, ...]

    @property
    def column_names(self) -> tuple[str, ...]:
        """The column names, in order."""
        return tuple(c.name for c in self.columns)


C = Column
_KEY = (
    C("model", "The catalog model name."),
    C("speculative_method", "The engine's speculative method, e.g. `dspark`, `mtp`."),
    C("num_spec_tokens", "K: draft tokens proposed per verification step; at least 1.",
      "tokens"),
    C("thinking", "Thinking mode: `on` or `off`."),
    C("category", "Workload category, e.g. `coding` (lower-case letters, digits, `_`, `-`)."),
)
_AL = C("acceptance_length", "AL: tokens a request gains per verification step, the target's "
        "bonus token included; in [1, K + 1].", "tokens per step")
_SAMPLING = (
    C("temperature", "`sampling.temperature`; 0 is greedy. NULL when no sampling was stated.",
      "unitless"),
    C("top_p", "`sampling.top_p`: nucleus probability mass, in (0, 1].", "probability"),
    C("top_k", "`sampling.top_k`: candidates kept; -1 and 0 disable it.", "tokens"),
    C("max_tokens", "`sampling.max_tokens`: the output cap.", "tokens"),
)
_PROVENANCE = (
    C("source", "`provenance.source`: the document the value was read from."),
    C("run", "`provenance.run`: the job that measured it, e.g. a GitHub Actions run."),
    C("benchmark", "`provenance.benchmark`: the prompt set, e.g. `SPEED-Bench Qualitative`."),
    C("prompts", "`provenance.prompts`: how many prompts it covered.", "prompts"),
    C("hardware", "`provenance.hardware`: the catalog chip it was measured on, e.g. `b300`."),
    C("engine_image", "`provenance.engine_image`: the engine image or release that ran."),
    C("tp", "`provenance.tp`: tensor-parallel width.", "GPUs"),
) + _SAMPLING

#: The counts of a profile and the standard error of its AL, as the views carry them (NULL for
#: a profile stored without counts).
_DRAFTS = C("drafts", "`counts.drafts`: D, the verification steps that drafted (vLLM "
            "`num_drafts`). NULL without counts.", "steps")
_COUNTS = (
    _DRAFTS,
    C("draft_tokens", "`counts.draft_tokens`: tokens drafted (vLLM `num_draft_tokens`).",
      "tokens"),
    C("accepted_tokens", "`counts.accepted_tokens`: A, drafted tokens accepted (vLLM "
      "`num_accepted_tokens`); AL is 1 + A / D within 0.01.", "tokens"),
)
_STDERR = (
    C("al_stderr", "The standard error of AL, √(Var X / D), X the drafts a step accepts: "
      "Var X = Σ (2i − 1) a_i / D − μ² with per-position counts, else the bound μ (K − μ), "
      "μ = A / D. Steps of one request are correlated, so the true spread is larger. NULL "
      "without counts.", "tokens per step"),
    C("al_stderr_exact", "1 when `al_stderr` is exact (per-position counts stored, or K = 1), 0 "
      "when it is the bound; NULL without counts."),
)

#: Where a revision's file came from, when it was read from a git work tree (0012).
_GIT = (
    C("git_commit", "The commit (`HEAD`, the full hash) of the git work tree the file was "
      "imported from; NULL outside git, and for deletions and restores."),
    C("git_dirty", "Whether the file's bytes were not that commit's (modified, staged, "
      "untracked or ignored); NULL outside git."),
    C("git_path", "The file's path from the repository's root; NULL outside git."),
)

VIEWS: dict[str, Relation] = {r.name: r for r in (
    Relation("acceptance_profiles", "view",
             "One row per profile of every set, with its provenance flattened in. The "
             "contract's stable view.", (
                 C("profile_id", "The profile's id (`profiles.id`)."),
                 C("profile_set", "The set's name (`profile_sets.name`)."),
                 *_KEY, _AL,
                 C("acceptance_rate", "The accepted fraction of drafts, (AL − 1) / K; in [0, 1].",
                   "probability"),
                 C("method", "How the value was obtained: `measured`, `literature`, "
                   "`vendor_spec`, `copied` or `assumed`."),
                 C("profile", "The spec's label `model/method/k<K>/thinking-<mode>/category`."),
                 C("provenance_id", "The shared provenance (`provenances.id`); equal ids mean "
                   "one measurement. NULL for `assumed` values without one."),
                 *_PROVENANCE,
                 C("rationale", "The reasoning behind a value that was not measured."),
                 C("copied_from", "For `copied`: the profile it was copied from, as a label."),
                 C("has_rates", "1 when per-position rates are stored "
                   "(see `profile_rates_long`), else 0."),
                 C("position", "The profile's 0-based place in its file."),
                 C("source_file", "The file the set was imported from."),
                 C("imported_at", "When the set's content was written.", "UTC timestamp"),
                 *_COUNTS, *_STDERR,
             )),
    Relation("profile_conflicts", "view",
             "One row per profile key held by two or more sets (the resolver refuses such a "
             "lookup as `conflict`). The contract's stable view.", (
                 *_KEY,
                 C("set_count", "How many sets hold the key.", "sets"),
                 C("min_acceptance_length", "The smallest AL among them.", "tokens per step"),
                 C("max_acceptance_length", "The largest AL among them.", "tokens per step"),
             )),
    Relation("profile_rates_long", "view",
             "Stored per-position rates in long form: one row per profile and position. "
             "Profiles without stored rates have no rows.", (
                 C("profile_id", "The profile (`profiles.id`)."),
                 C("profile_set", "The set's name."),
                 *_KEY, _AL,
                 C("position", "i, from 1 to K."),
                 C("rate", "p_i: the unconditional probability that the first i drafts are all "
                   "accepted; non-increasing in i, summing to AL − 1.", "probability"),
             )),
    Relation("provenance_details", "view",
             "One row per provenance and engine setting (one row with NULL settings when it "
             "has none).", (
                 C("provenance_id", "The provenance (`provenances.id`)."),
                 *_PROVENANCE,
                 C("setting_name", "`provenance.settings` key, e.g. `rejection_sample_method`."),
                 C("setting_value", "The setting's value as text (booleans `true`/`false`)."),
                 C("setting_type", "How the file wrote it: `string`, `integer`, `number` or "
                   "`boolean`."),
                 C("profile_count", "How many profiles (in all sets) cite this provenance.",
                   "profiles"),
             )),
    Relation("profile_coverage", "view",
             "The coverage grid, one row per cell and set: every (model, speculative_method) "
             "pair stored, times both thinking modes, times every category stored, times K "
             "from 1 to the largest K stored. A cell no set holds is one row with NULL "
             "`profile_set` (a run there is refused or falls back); a cell two sets hold is two "
             "rows (a run there is a `conflict`). `registry coverage` reads it.", (
                 C("model", "The catalog model name."),
                 C("speculative_method", "The engine's speculative method, e.g. `dspark`, "
                   "`mtp`."),
                 C("thinking", "Thinking mode: `on` or `off` (both, for every pair)."),
                 C("category", "Workload category: every category any profile has."),
                 C("num_spec_tokens", "K, from 1 to the largest K of any profile.", "tokens"),
                 C("profile_set", "The set holding the cell; NULL when no set does."),
                 C("profile_id", "The profile (`profiles.id`); NULL when no set holds the "
                   "cell."),
                 C("acceptance_length", "AL of that set's profile, in [1, K + 1]; NULL when no "
                   "set holds the cell.", "tokens per step"),
                 C("method", "How the value was obtained (`methods.name`); NULL when missing."),
                 C("set_count", "How many sets hold the cell: 0 missing, 1 resolvable, 2 or more "
                   "a conflict.", "sets"),
                 _DRAFTS, *_STDERR,
             )),
    Relation("set_revisions", "view",
             "One row per revision of every set, deleted sets included: each import that "
             "added or changed a set, and each deletion.", (
                 C("profile_set", "The set's name."),
                 C("revision", "1, 2, … per set, with no gaps."),
                 C("action", "`added`, `updated` or `deleted`."),
                 C("imported_at", "When the revision was written.", "UTC timestamp"),
                 C("source_file", "The file it was imported from (for a deletion: the file "
                   "the set last came from)."),
                 C("content_hash", "SHA-256 of the revision's content; NULL for a deletion."),
                 C("profile_count", "Its profiles (0 for a deletion).", "profiles"),
                 C("caveat_count", "Its caveats.", "caveats"),
                 C("message", "The `-m MESSAGE` given to `registry import` or `registry delete`."),
                 C("is_latest", "1 for the set's newest revision, else 0."),
                 *_GIT,
             )),
    Relation("profile_history", "view",
             "One row per profile of every revision of every set, with the time range it was "
             "current: from its revision's `valid_from` until the set's next revision "
             "(`superseded_by`, `valid_until`; NULL while it is the latest).", (
                 C("profile_set", "The set's name."),
                 C("revision", "The set revision that held this row."),
                 C("action", "That revision's action: `added` or `updated`."),
                 *_KEY,
                 C("profile", "The spec's label `model/method/k<K>/thinking-<mode>/category`."),
                 _AL,
                 C("acceptance_rate", "(AL − 1) / K.", "probability"),
                 C("method", "How the value was obtained."),
                 C("provenance_id", "The shared provenance (`provenances.id`)."),
                 C("source", "`provenance.source`."),
                 C("hardware", "`provenance.hardware`."),
                 C("engine_image", "`provenance.engine_image`."),
                 C("rationale", "The reasoning behind a value that was not measured."),
                 C("copied_from", "For `copied`: the profile it was copied from, as a label."),
                 C("valid_from", "When this revision was written.", "UTC timestamp"),
                 C("valid_until", "When the set's next revision (an update or its deletion) "
                   "replaced it; NULL while current.", "UTC timestamp"),
                 C("superseded_by", "The next revision's number; NULL while current."),
                 C("is_current", "1 when the row is in the current registry, else 0."),
                 *_COUNTS, *_STDERR,
             )),
    Relation("set_overview", "view", "One row per set.", (
        C("profile_set", "The set's name."),
        C("source_file", "The file it was imported from."),
        C("imported_at", "When its content was written.", "UTC timestamp"),
        C("content_hash", "SHA-256 of the set's meaning; unchanged content keeps it."),
        C("profile_count", "Its profiles.", "profiles"),
        C("caveat_count", "Its caveats.", "caveats"),
    )),
)}

_TABLE_COUNTS = (
    C("drafts", "D: verification steps that drafted (vLLM `num_drafts`); at least 1.", "steps"),
    C("draft_tokens", "Tokens drafted (vLLM `num_draft_tokens`); at most K × D.", "tokens"),
    C("accepted_tokens", "A: drafted tokens accepted (vLLM `num_accepted_tokens`); at most "
      "`draft_tokens`.", "tokens"),
    C("accepted_per_position", "a_1..a_K as a JSON array of integers, `[70000,40000,16838]` "
      "(a_i: steps that accepted at least i drafts; non-increasing, summing to A); NULL when "
      "not known. Read it with `json_each` (SQLite) or `::jsonb` (PostgreSQL)."),
    C("al_stderr", "The standard error of AL, computed when the row was written by "
      "`Counts.uncertainty` (SQLite has no portable SQRT); see the views' column.",
      "tokens per step"),
)

TABLES: dict[str, Relation] = {r.name: r for r in (
    Relation("profile_sets", "table", "A profile set: one file of `acceptance/`.", (
        C("id", "Surrogate key."),
        C("name", "The set's identity; unique and not empty."),
        C("source_file", "The file it was imported from, as the importer was given it."),
        C("content_hash", "SHA-256 of the set's meaning; an import with the same hash is "
          "`unchanged`."),
        C("imported_at", "When this content was written.", "UTC timestamp"),
        C("revision", "The set's current revision (`revisions.revision`); resolutions report "
          "it."),
    )),
    Relation("set_caveats", "table", "A set's caveats, in file order.", (
        C("set_id", "The set (`profile_sets.id`); deleted with it."),
        C("position", "0-based order in the file."),
        C("text", "The caveat; not empty."),
    )),
    Relation("methods", "table", "The methods vocabulary and what each requires of a profile "
             "(seeded by the first migration). Booleans read 1/0 on SQLite, true/false on "
             "PostgreSQL.", (
                 C("name", "`measured`, `literature`, `vendor_spec`, `copied`, `assumed`, "
                   "`not_charged`."),
                 C("description", "What the method means."),
                 C("allowed_in_profile", "Whether a profile may use it (not `not_charged`)."),
                 C("requires_provenance", "A profile with it needs a provenance."),
                 C("requires_rationale", "A profile with it needs a rationale."),
                 C("requires_copied_from", "A profile with it needs `copied_from`."),
                 C("requires_measurement", "Its provenance needs hardware, engine_image and "
                   "sampling."),
             )),
    Relation("provenances", "table", "One distinct provenance, shared by every profile that "
             "cites the same content.", (
                 C("id", "Surrogate key."),
                 C("content_hash", "SHA-256 of the content, settings included: its identity."),
                 *_PROVENANCE,
             )),
    Relation("provenance_settings", "table", "A provenance's engine settings, by name.", (
        C("provenance_id", "The provenance (`provenances.id`); deleted with it."),
        C("name", "The setting's name; not empty."),
        C("value", "Its value as text (booleans `true`/`false`); not empty."),
        C("value_type", "`string`, `integer`, `number` or `boolean`: how the file wrote it."),
    )),
    Relation("profiles", "table", "One profile of one set.", (
        C("id", "Surrogate key."),
        C("set_id", "The set (`profile_sets.id`); deleted with it."),
        C("position", "0-based order in the file."),
        *_KEY, _AL,
        C("method", "How the value was obtained (`methods.name`)."),
        C("provenance_id", "Where it was measured (`provenances.id`); NULL only for "
          "`assumed`."),
        C("rationale", "The reasoning behind a value that was not measured."),
        C("copied_from", "For `copied`: the source profile's label."),
    )),
    Relation("profile_rates", "table", "Per-position rates of a profile, when the file "
             "states them.", (
                 C("profile_id", "The profile (`profiles.id`); deleted with it."),
                 C("position", "i, from 1 to K."),
                 C("rate", "p_i: P(the first i drafts are all accepted).", "probability"),
             )),
    Relation("profile_counts", "table", "The counts a profile's AL was computed from, when "
             "its file states them (`counts`; one row per such profile).", (
                 C("profile_id", "The profile (`profiles.id`); deleted with it."),
                 *_TABLE_COUNTS,
             )),
    Relation("revisions", "table", "One row per revision of a set: an import that added or "
             "changed it, or its deletion. Unique per (`set_name`, `revision`).", (
                 C("id", "Surrogate key."),
                 C("set_name", "The set's name; revisions outlive the set's `profile_sets` row."),
                 C("revision", "1, 2, … per set, with no gaps."),
                 C("action", "`added`, `updated` or `deleted`."),
                 C("imported_at", "When the revision was written.", "UTC timestamp"),
                 C("source_file", "The file it was imported from."),
                 C("content_hash", "SHA-256 of the content; NULL for a deletion."),
                 C("profile_count", "Its profiles (0 for a deletion).", "profiles"),
                 C("message", "The `-m MESSAGE` of the import or deletion."),
                 *_GIT,
             )),
    Relation("revision_caveats", "table", "A revision's caveats, in file order.", (
        C("revision_id", "The revision (`revisions.id`)."),
        C("position", "0-based order in the file."),
        C("text", "The caveat; not empty."),
    )),
    Relation("profile_versions", "table", "Each version of a profile, stored once: the range "
             "of its set's revisions that held it, and when.", (
                 C("id", "Surrogate key."),
                 C("set_name", "The set's name (`revisions.set_name`)."),
                 C("first_revision", "The first revision of the set that holds this version."),
                 C("last_revision", "The last revision that holds it; NULL while the set's "
                   "latest revision does."),
                 C("valid_from", "When it became current: `first_revision`'s `imported_at`.",
                   "UTC timestamp"),
                 C("valid_until", "When it stopped being current (replaced, removed or the set "
                   "deleted): the next revision's `imported_at`; NULL while current.",
                   "UTC timestamp"),
                 C("position", "0-based order in the file."),
                 *_KEY, _AL,
                 C("method", "How the value was obtained (`methods.name`)."),
                 C("provenance_id", "Where it was measured (`provenances.id`)."),
                 C("rationale", "The reasoning behind a value that was not measured."),
                 C("copied_from", "For `copied`: the source profile's label."),
                 C("key_id", "The stretch of time its set held its key (`profile_keys.id`): "
                   "the as-of lookup finds a version by it and its first revision."),
             )),
    Relation("profile_keys", "table", "When each set held each profile key, whatever its "
             "values: one row per unbroken stretch (a removal or the set's deletion ends it).", (
                 C("id", "Surrogate key."),
                 C("set_name", "The set's name (`revisions.set_name`)."),
                 *_KEY,
                 C("valid_from", "When the set began to hold the key.", "UTC timestamp"),
                 C("valid_until", "When it stopped (the key removed or the set deleted); NULL "
                   "while it holds it.", "UTC timestamp"),
             )),
    Relation("version_rates", "table", "Per-position rates of a profile version.", (
        C("profile_id", "The profile version (`profile_versions.id`)."),
        C("position", "i, from 1 to K."),
        C("rate", "p_i: P(the first i drafts are all accepted).", "probability"),
    )),
    Relation("version_counts", "table", "The counts of a profile version.", (
        C("profile_id", "The profile version (`profile_versions.id`)."),
        *_TABLE_COUNTS,
    )),
    Relation("alembic_version", "table", "Alembic's bookkeeping: the schema revision.", (
        C("version_num", "The revision the database is at, e.g. `0005`."),
    )),
    Relation("import_files", "table", "What each imported file's bytes held when last read: "
             "a re-import skips a file whose bytes and reading rules are the same while its "
             "set still has that content. A cache: losing it costs one full read.", (
                 C("path", "The file as the importer was given it."),
                 C("bytes_hash", "SHA-256 of the file's bytes."),
                 C("rules", "The version of the reading rules (YAML, checks, normalisation) "
                   "that read them; new rules read every file again."),
                 C("set_name", "The set the file declares."),
                 C("content_hash", "The set's content hash those bytes gave "
                   "(`profile_sets.content_hash`)."),
                 C("profiles", "The set's profiles.", "profiles"),
                 C("findings", "The file's warnings as a JSON array, repeated when it is "
                   "skipped; NULL when none."),
             )),
    Relation("labels", "table", "A label: a name a team gives to a state of the registry, "
             "read wherever `--as-of` takes a time. One row per label, at its latest position "
             "(`label_events` keeps every one).", (
                 C("name", "The label's name: a letter or digit, then letters, digits, '.', "
                   "'_' or '-', at most 64 characters; never one that reads as a time."),
                 C("as_of", "The moment it names: `--as-of LABEL` reads the registry as of it.",
                   "UTC timestamp"),
                 C("set_name", "The set whose revision it was made from (`SET@REVISION`); NULL "
                   "when made from a time."),
                 C("revision", "That revision's number; its `imported_at` is `as_of`."),
                 C("labelled_at", "When it was given this position.", "UTC timestamp"),
                 C("message", "The `-m MESSAGE` given with it."),
             )),
    Relation("label_events", "table", "Every position a label was given, oldest first: its "
             "creation and each move (`--force`).", (
                 C("id", "Surrogate key; rises with time."),
                 C("name", "The label (`labels.name`)."),
                 C("action", "`created` or `moved`."),
                 C("as_of", "The moment it named from then on.", "UTC timestamp"),
                 C("set_name", "The set whose revision it was made from; NULL when made from a "
                   "time."),
                 C("revision", "That revision's number."),
                 C("labelled_at", "When.", "UTC timestamp"),
                 C("message", "The `-m MESSAGE` given with it."),
             )),
)}

#: The columns the contract promises analysts, per stable view; later migrations keep them.
CONTRACT_COLUMNS: dict[str, tuple[str, ...]] = {
    "acceptance_profiles": (
        "profile_set", "model", "speculative_method", "num_spec_tokens", "thinking", "category",
        "acceptance_length", "acceptance_rate", "method", "source", "run", "benchmark",
        "hardware", "engine_image", "provenance_id",
    ),
    "profile_conflicts": (
        "model", "speculative_method", "num_spec_tokens", "thinking", "category", "set_count",
    ),
}

RELATIONS: dict[str, Relation] = {**VIEWS, **TABLES}

_BEGIN = "<!-- reference:{kind}s:begin (generated by registry_db.store.catalog; do not edit) -->"
_END = "<!-- reference:{kind}s:end -->"


def reference_markdown(kind: str) -> str:
    """The Markdown reference of every view (``kind="view"``) or table (``"table"``)."""
    rels = VIEWS if kind == "view" else TABLES
    parts = []
    for rel in rels.values():
        lines = [f"### `{rel.name}`", "", rel.summary, "", "| column | meaning | unit |",
                 "|---|---|---|"]
        lines += [f"| `{c.name}` | {c.meaning} | {c.unit} |" for c in rel.columns]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def embedded_reference(document: str, kind: str) -> str | None:
    """The generated block of ``kind`` in ``document`` (None when its markers are missing)."""
    pattern = re.escape(_BEGIN.format(kind=kind)) + r"(.*?)" + re.escape(_END.format(kind=kind))
    m = re.search(pattern, document, re.S)
    return m.group(1).strip("\n") if m else None


def update_reference(path: str | Path) -> bool:
    """Rewrite the generated blocks of the document at ``path``; True when it changed."""
    path = Path(path)
    old = path.read_text(encoding="utf-8")
    new = old
    for kind in ("view", "table"):
        begin, end = _BEGIN.format(kind=kind), _END.format(kind=kind)
        pattern = re.escape(begin) + r".*?" + re.escape(end)
        block = f"{begin}\n\n{reference_markdown(kind)}\n\n{end}"
        new = re.sub(pattern, lambda _m: block, new, flags=re.S)  # noqa: B023 - used at once
    if new != old:
        path.write_text(new, encoding="utf-8")
    return new != old


def plain_text(text: str, unit: str = "") -> str:
    """A description as plain text, its unit after it: what PostgreSQL's ``COMMENT ON`` (psql
    ``\\d+``) and Datasette show, neither of which renders the Markdown code marks."""
    words = text.replace("`", "")
    return f"{words} Unit: {unit}." if unit else words


def comments() -> dict[str, tuple[str, str, dict[str, str]]]:
    """Every relation's description as a database comment: name -> (kind, its text, {column:
    its text}). The comments migration carries a copy (a test holds them equal)."""
    return {r.name: (r.kind, plain_text(r.summary),
                     {c.name: plain_text(c.meaning, c.unit) for c in r.columns})
            for r in RELATIONS.values()}
