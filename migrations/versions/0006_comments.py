r"""Comments: every table, view and column describes itself on PostgreSQL (psql ``\d+``).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

``COMMENT ON TABLE/VIEW/COLUMN`` with the descriptions of the catalog (``store/catalog.py``, the
same words as ``docs/schema.md``, Markdown code marks dropped and the unit after the meaning).
The texts are this file's own copy, as the catalog had them at this revision: a later change of
a description is a new migration (a test holds the newest copy equal to the catalog). SQLite has
no comments (Datasette's metadata carries the same texts there), so it changes nothing on
SQLite. The downgrade removes the comments; no data is lost either way.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

#: relation -> (kind, its comment, {column: its comment}), as the catalog had them.
COMMENTS: dict[str, tuple[str, str, dict[str, str]]] = {
    'acceptance_profiles': ('view',
        ("One row per profile of every set, with its provenance flattened in. The contract's "
         'stable view.'),
        {
            'profile_id': "The profile's id (profiles.id).",
            'profile_set': "The set's name (profile_sets.name).",
            'model': 'The catalog model name.',
            'speculative_method': "The engine's speculative method, e.g. dspark, mtp.",
            'num_spec_tokens': ('K: draft tokens proposed per verification step; at least 1. '
                                'Unit: tokens.'),
            'thinking': 'Thinking mode: on or off.',
            'category': 'Workload category, e.g. coding (lower-case letters, digits, _, -).',
            'acceptance_length': ('AL: tokens a request gains per verification step, the '
                                  "target's bonus token included; in [1, K + 1]. Unit: tokens "
                                  'per step.'),
            'acceptance_rate': ('The accepted fraction of drafts, (AL − 1) / K; in [0, 1]. '
                                'Unit: probability.'),
            'method': ('How the value was obtained: measured, literature, vendor_spec, copied '
                       'or assumed.'),
            'profile': "The spec's label model/method/k<K>/thinking-<mode>/category.",
            'provenance_id': ('The shared provenance (provenances.id); equal ids mean one '
                              'measurement. NULL for assumed values without one.'),
            'source': 'provenance.source: the document the value was read from.',
            'run': 'provenance.run: the job that measured it, e.g. a GitHub Actions run.',
            'benchmark': 'provenance.benchmark: the prompt set, e.g. SPEED-Bench Qualitative.',
            'prompts': 'provenance.prompts: how many prompts it covered. Unit: prompts.',
            'hardware': 'provenance.hardware: the catalog chip it was measured on, e.g. b300.',
            'engine_image': 'provenance.engine_image: the engine image or release that ran.',
            'tp': 'provenance.tp: tensor-parallel width. Unit: GPUs.',
            'temperature': ('sampling.temperature; 0 is greedy. NULL when no sampling was '
                            'stated. Unit: unitless.'),
            'top_p': 'sampling.top_p: nucleus probability mass, in (0, 1]. Unit: probability.',
            'top_k': 'sampling.top_k: candidates kept; -1 and 0 disable it. Unit: tokens.',
            'max_tokens': 'sampling.max_tokens: the output cap. Unit: tokens.',
            'rationale': 'The reasoning behind a value that was not measured.',
            'copied_from': 'For copied: the profile it was copied from, as a label.',
            'has_rates': '1 when per-position rates are stored (see profile_rates_long), else 0.',
            'position': "The profile's 0-based place in its file.",
            'source_file': 'The file the set was imported from.',
            'imported_at': "When the set's content was written. Unit: UTC timestamp.",
            'drafts': ('counts.drafts: D, the verification steps that drafted (vLLM '
                       'num_drafts). NULL without counts. Unit: steps.'),
            'draft_tokens': ('counts.draft_tokens: tokens drafted (vLLM num_draft_tokens). '
                             'Unit: tokens.'),
            'accepted_tokens': ('counts.accepted_tokens: A, drafted tokens accepted (vLLM '
                                'num_accepted_tokens); AL is 1 + A / D within 0.01. Unit: '
                                'tokens.'),
            'al_stderr': ('The standard error of AL, √(Var X / D), X the drafts a step '
                          'accepts: Var X = Σ (2i − 1) a_i / D − μ² with per-position counts, '
                          'else the bound μ (K − μ), μ = A / D. Steps of one request are '
                          'correlated, so the true spread is larger. NULL without counts. '
                          'Unit: tokens per step.'),
            'al_stderr_exact': ('1 when al_stderr is exact (per-position counts stored), 0 '
                                'when it is the bound; NULL without counts.'),
        }),
    'profile_conflicts': ('view',
        ('One row per profile key held by two or more sets (the resolver refuses such a lookup '
         "as conflict). The contract's stable view."),
        {
            'model': 'The catalog model name.',
            'speculative_method': "The engine's speculative method, e.g. dspark, mtp.",
            'num_spec_tokens': ('K: draft tokens proposed per verification step; at least 1. '
                                'Unit: tokens.'),
            'thinking': 'Thinking mode: on or off.',
            'category': 'Workload category, e.g. coding (lower-case letters, digits, _, -).',
            'set_count': 'How many sets hold the key. Unit: sets.',
            'min_acceptance_length': 'The smallest AL among them. Unit: tokens per step.',
            'max_acceptance_length': 'The largest AL among them. Unit: tokens per step.',
        }),
    'profile_rates_long': ('view',
        ('Stored per-position rates in long form: one row per profile and position. Profiles '
         'without stored rates have no rows.'),
        {
            'profile_id': 'The profile (profiles.id).',
            'profile_set': "The set's name.",
            'model': 'The catalog model name.',
            'speculative_method': "The engine's speculative method, e.g. dspark, mtp.",
            'num_spec_tokens': ('K: draft tokens proposed per verification step; at least 1. '
                                'Unit: tokens.'),
            'thinking': 'Thinking mode: on or off.',
            'category': 'Workload category, e.g. coding (lower-case letters, digits, _, -).',
            'acceptance_length': ('AL: tokens a request gains per verification step, the '
                                  "target's bonus token included; in [1, K + 1]. Unit: tokens "
                                  'per step.'),
            'position': 'i, from 1 to K.',
            'rate': ('p_i: the unconditional probability that the first i drafts are all '
                     'accepted; non-increasing in i, summing to AL − 1. Unit: probability.'),
        }),
    'provenance_details': ('view',
        'One row per provenance and engine setting (one row with NULL settings when it has none).',
        {
            'provenance_id': 'The provenance (provenances.id).',
            'source': 'provenance.source: the document the value was read from.',
            'run': 'provenance.run: the job that measured it, e.g. a GitHub Actions run.',
            'benchmark': 'provenance.benchmark: the prompt set, e.g. SPEED-Bench Qualitative.',
            'prompts': 'provenance.prompts: how many prompts it covered. Unit: prompts.',
            'hardware': 'provenance.hardware: the catalog chip it was measured on, e.g. b300.',
            'engine_image': 'provenance.engine_image: the engine image or release that ran.',
            'tp': 'provenance.tp: tensor-parallel width. Unit: GPUs.',
            'temperature': ('sampling.temperature; 0 is greedy. NULL when no sampling was '
                            'stated. Unit: unitless.'),
            'top_p': 'sampling.top_p: nucleus probability mass, in (0, 1]. Unit: probability.',
            'top_k': 'sampling.top_k: candidates kept; -1 and 0 disable it. Unit: tokens.',
            'max_tokens': 'sampling.max_tokens: the output cap. Unit: tokens.',
            'setting_name': 'provenance.settings key, e.g. rejection_sample_method.',
            'setting_value': "The setting's value as text (booleans true/false).",
            'setting_type': 'How the file wrote it: string, integer, number or boolean.',
            'profile_count': ('How many profiles (in all sets) cite this provenance. Unit: '
                              'profiles.'),
        }),
    'profile_coverage': ('view',
        ('The coverage grid, one row per cell and set: every (model, speculative_method) pair '
         'stored, times both thinking modes, times every category stored, times K from 1 to '
         'the largest K stored. A cell no set holds is one row with NULL profile_set (a run '
         'there is refused or falls back); a cell two sets hold is two rows (a run there is a '
         'conflict). registry coverage reads it.'),
        {
            'model': 'The catalog model name.',
            'speculative_method': "The engine's speculative method, e.g. dspark, mtp.",
            'thinking': 'Thinking mode: on or off (both, for every pair).',
            'category': 'Workload category: every category any profile has.',
            'num_spec_tokens': 'K, from 1 to the largest K of any profile. Unit: tokens.',
            'profile_set': 'The set holding the cell; NULL when no set does.',
            'profile_id': 'The profile (profiles.id); NULL when no set holds the cell.',
            'acceptance_length': ("AL of that set's profile, in [1, K + 1]; NULL when no set "
                                  'holds the cell. Unit: tokens per step.'),
            'method': 'How the value was obtained (methods.name); NULL when missing.',
            'set_count': ('How many sets hold the cell: 0 missing, 1 resolvable, 2 or more a '
                          'conflict. Unit: sets.'),
            'drafts': ('counts.drafts: D, the verification steps that drafted (vLLM '
                       'num_drafts). NULL without counts. Unit: steps.'),
            'al_stderr': ('The standard error of AL, √(Var X / D), X the drafts a step '
                          'accepts: Var X = Σ (2i − 1) a_i / D − μ² with per-position counts, '
                          'else the bound μ (K − μ), μ = A / D. Steps of one request are '
                          'correlated, so the true spread is larger. NULL without counts. '
                          'Unit: tokens per step.'),
            'al_stderr_exact': ('1 when al_stderr is exact (per-position counts stored), 0 '
                                'when it is the bound; NULL without counts.'),
        }),
    'set_revisions': ('view',
        ('One row per revision of every set, deleted sets included: each import that added or '
         'changed a set, and each deletion.'),
        {
            'profile_set': "The set's name.",
            'revision': '1, 2, … per set, with no gaps.',
            'action': 'added, updated or deleted.',
            'imported_at': 'When the revision was written. Unit: UTC timestamp.',
            'source_file': ('The file it was imported from (for a deletion: the file the set '
                            'last came from).'),
            'content_hash': "SHA-256 of the revision's content; NULL for a deletion.",
            'profile_count': 'Its profiles (0 for a deletion). Unit: profiles.',
            'caveat_count': 'Its caveats. Unit: caveats.',
            'message': 'The -m MESSAGE given to registry import or registry delete.',
            'is_latest': "1 for the set's newest revision, else 0.",
        }),
    'profile_history': ('view',
        ('One row per profile of every revision of every set, with the time range it was '
         "current: from its revision's valid_from until the set's next revision "
         '(superseded_by, valid_until; NULL while it is the latest).'),
        {
            'profile_set': "The set's name.",
            'revision': 'The set revision that held this row.',
            'action': "That revision's action: added or updated.",
            'model': 'The catalog model name.',
            'speculative_method': "The engine's speculative method, e.g. dspark, mtp.",
            'num_spec_tokens': ('K: draft tokens proposed per verification step; at least 1. '
                                'Unit: tokens.'),
            'thinking': 'Thinking mode: on or off.',
            'category': 'Workload category, e.g. coding (lower-case letters, digits, _, -).',
            'profile': "The spec's label model/method/k<K>/thinking-<mode>/category.",
            'acceptance_length': ('AL: tokens a request gains per verification step, the '
                                  "target's bonus token included; in [1, K + 1]. Unit: tokens "
                                  'per step.'),
            'acceptance_rate': '(AL − 1) / K. Unit: probability.',
            'method': 'How the value was obtained.',
            'provenance_id': 'The shared provenance (provenances.id).',
            'source': 'provenance.source.',
            'hardware': 'provenance.hardware.',
            'engine_image': 'provenance.engine_image.',
            'rationale': 'The reasoning behind a value that was not measured.',
            'copied_from': 'For copied: the profile it was copied from, as a label.',
            'valid_from': 'When this revision was written. Unit: UTC timestamp.',
            'valid_until': ("When the set's next revision (an update or its deletion) replaced "
                            'it; NULL while current. Unit: UTC timestamp.'),
            'superseded_by': "The next revision's number; NULL while current.",
            'is_current': '1 when the row is in the current registry, else 0.',
            'drafts': ('counts.drafts: D, the verification steps that drafted (vLLM '
                       'num_drafts). NULL without counts. Unit: steps.'),
            'draft_tokens': ('counts.draft_tokens: tokens drafted (vLLM num_draft_tokens). '
                             'Unit: tokens.'),
            'accepted_tokens': ('counts.accepted_tokens: A, drafted tokens accepted (vLLM '
                                'num_accepted_tokens); AL is 1 + A / D within 0.01. Unit: '
                                'tokens.'),
            'al_stderr': ('The standard error of AL, √(Var X / D), X the drafts a step '
                          'accepts: Var X = Σ (2i − 1) a_i / D − μ² with per-position counts, '
                          'else the bound μ (K − μ), μ = A / D. Steps of one request are '
                          'correlated, so the true spread is larger. NULL without counts. '
                          'Unit: tokens per step.'),
            'al_stderr_exact': ('1 when al_stderr is exact (per-position counts stored), 0 '
                                'when it is the bound; NULL without counts.'),
        }),
    'set_overview': ('view',
        'One row per set.',
        {
            'profile_set': "The set's name.",
            'source_file': 'The file it was imported from.',
            'imported_at': 'When its content was written. Unit: UTC timestamp.',
            'content_hash': "SHA-256 of the set's meaning; unchanged content keeps it.",
            'profile_count': 'Its profiles. Unit: profiles.',
            'caveat_count': 'Its caveats. Unit: caveats.',
        }),
    'profile_sets': ('table',
        'A profile set: one file of acceptance/.',
        {
            'id': 'Surrogate key.',
            'name': "The set's identity; unique and not empty.",
            'source_file': 'The file it was imported from, as the importer was given it.',
            'content_hash': ("SHA-256 of the set's meaning; an import with the same hash is "
                             'unchanged.'),
            'imported_at': 'When this content was written. Unit: UTC timestamp.',
            'revision': "The set's current revision (revisions.revision); resolutions report it.",
        }),
    'set_caveats': ('table',
        "A set's caveats, in file order.",
        {
            'set_id': 'The set (profile_sets.id); deleted with it.',
            'position': '0-based order in the file.',
            'text': 'The caveat; not empty.',
        }),
    'methods': ('table',
        ('The methods vocabulary and what each requires of a profile (seeded by the first '
         'migration). Booleans read 1/0 on SQLite, true/false on PostgreSQL.'),
        {
            'name': 'measured, literature, vendor_spec, copied, assumed, not_charged.',
            'description': 'What the method means.',
            'allowed_in_profile': 'Whether a profile may use it (not not_charged).',
            'requires_provenance': 'A profile with it needs a provenance.',
            'requires_rationale': 'A profile with it needs a rationale.',
            'requires_copied_from': 'A profile with it needs copied_from.',
            'requires_measurement': 'Its provenance needs hardware, engine_image and sampling.',
        }),
    'provenances': ('table',
        'One distinct provenance, shared by every profile that cites the same content.',
        {
            'id': 'Surrogate key.',
            'content_hash': 'SHA-256 of the content, settings included: its identity.',
            'source': 'provenance.source: the document the value was read from.',
            'run': 'provenance.run: the job that measured it, e.g. a GitHub Actions run.',
            'benchmark': 'provenance.benchmark: the prompt set, e.g. SPEED-Bench Qualitative.',
            'prompts': 'provenance.prompts: how many prompts it covered. Unit: prompts.',
            'hardware': 'provenance.hardware: the catalog chip it was measured on, e.g. b300.',
            'engine_image': 'provenance.engine_image: the engine image or release that ran.',
            'tp': 'provenance.tp: tensor-parallel width. Unit: GPUs.',
            'temperature': ('sampling.temperature; 0 is greedy. NULL when no sampling was '
                            'stated. Unit: unitless.'),
            'top_p': 'sampling.top_p: nucleus probability mass, in (0, 1]. Unit: probability.',
            'top_k': 'sampling.top_k: candidates kept; -1 and 0 disable it. Unit: tokens.',
            'max_tokens': 'sampling.max_tokens: the output cap. Unit: tokens.',
        }),
    'provenance_settings': ('table',
        "A provenance's engine settings, by name.",
        {
            'provenance_id': 'The provenance (provenances.id); deleted with it.',
            'name': "The setting's name; not empty.",
            'value': 'Its value as text (booleans true/false); not empty.',
            'value_type': 'string, integer, number or boolean: how the file wrote it.',
        }),
    'profiles': ('table',
        'One profile of one set.',
        {
            'id': 'Surrogate key.',
            'set_id': 'The set (profile_sets.id); deleted with it.',
            'position': '0-based order in the file.',
            'model': 'The catalog model name.',
            'speculative_method': "The engine's speculative method, e.g. dspark, mtp.",
            'num_spec_tokens': ('K: draft tokens proposed per verification step; at least 1. '
                                'Unit: tokens.'),
            'thinking': 'Thinking mode: on or off.',
            'category': 'Workload category, e.g. coding (lower-case letters, digits, _, -).',
            'acceptance_length': ('AL: tokens a request gains per verification step, the '
                                  "target's bonus token included; in [1, K + 1]. Unit: tokens "
                                  'per step.'),
            'method': 'How the value was obtained (methods.name).',
            'provenance_id': 'Where it was measured (provenances.id); NULL only for assumed.',
            'rationale': 'The reasoning behind a value that was not measured.',
            'copied_from': "For copied: the source profile's label.",
        }),
    'profile_rates': ('table',
        'Per-position rates of a profile, when the file states them.',
        {
            'profile_id': 'The profile (profiles.id); deleted with it.',
            'position': 'i, from 1 to K.',
            'rate': 'p_i: P(the first i drafts are all accepted). Unit: probability.',
        }),
    'profile_counts': ('table',
        ("The counts a profile's AL was computed from, when its file states them (counts; one "
         'row per such profile).'),
        {
            'profile_id': 'The profile (profiles.id); deleted with it.',
            'drafts': ('D: verification steps that drafted (vLLM num_drafts); at least 1. '
                       'Unit: steps.'),
            'draft_tokens': 'Tokens drafted (vLLM num_draft_tokens); at most K × D. Unit: tokens.',
            'accepted_tokens': ('A: drafted tokens accepted (vLLM num_accepted_tokens); at '
                                'most draft_tokens. Unit: tokens.'),
            'accepted_per_position': ('a_1..a_K as a JSON array of integers, '
                                      '[70000,40000,16838] (a_i: steps that accepted at least '
                                      'i drafts; non-increasing, summing to A); NULL when not '
                                      'known. Read it with json_each (SQLite) or ::jsonb '
                                      '(PostgreSQL).'),
            'al_stderr': ('The standard error of AL, computed when the row was written by '
                          "Counts.uncertainty (SQLite has no portable SQRT); see the views' "
                          'column. Unit: tokens per step.'),
        }),
    'revisions': ('table',
        ('One row per revision of a set: an import that added or changed it, or its deletion. '
         'Unique per (set_name, revision).'),
        {
            'id': 'Surrogate key.',
            'set_name': "The set's name; revisions outlive the set's profile_sets row.",
            'revision': '1, 2, … per set, with no gaps.',
            'action': 'added, updated or deleted.',
            'imported_at': 'When the revision was written. Unit: UTC timestamp.',
            'source_file': 'The file it was imported from.',
            'content_hash': 'SHA-256 of the content; NULL for a deletion.',
            'profile_count': 'Its profiles (0 for a deletion). Unit: profiles.',
            'message': 'The -m MESSAGE of the import or deletion.',
        }),
    'revision_caveats': ('table',
        "A revision's caveats, in file order.",
        {
            'revision_id': 'The revision (revisions.id).',
            'position': '0-based order in the file.',
            'text': 'The caveat; not empty.',
        }),
    'revision_profiles': ('table',
        "A full copy of each revision's profiles.",
        {
            'id': 'Surrogate key.',
            'revision_id': 'The revision (revisions.id).',
            'position': '0-based order in the file.',
            'model': 'The catalog model name.',
            'speculative_method': "The engine's speculative method, e.g. dspark, mtp.",
            'num_spec_tokens': ('K: draft tokens proposed per verification step; at least 1. '
                                'Unit: tokens.'),
            'thinking': 'Thinking mode: on or off.',
            'category': 'Workload category, e.g. coding (lower-case letters, digits, _, -).',
            'acceptance_length': ('AL: tokens a request gains per verification step, the '
                                  "target's bonus token included; in [1, K + 1]. Unit: tokens "
                                  'per step.'),
            'method': 'How the value was obtained (methods.name).',
            'provenance_id': 'Where it was measured (provenances.id).',
            'rationale': 'The reasoning behind a value that was not measured.',
            'copied_from': "For copied: the source profile's label.",
        }),
    'revision_rates': ('table',
        "Per-position rates of a revision's profile.",
        {
            'profile_id': 'The profile (revision_profiles.id).',
            'position': 'i, from 1 to K.',
            'rate': 'p_i: P(the first i drafts are all accepted). Unit: probability.',
        }),
    'revision_counts': ('table',
        "The counts of a revision's profile.",
        {
            'profile_id': 'The profile (revision_profiles.id).',
            'drafts': ('D: verification steps that drafted (vLLM num_drafts); at least 1. '
                       'Unit: steps.'),
            'draft_tokens': 'Tokens drafted (vLLM num_draft_tokens); at most K × D. Unit: tokens.',
            'accepted_tokens': ('A: drafted tokens accepted (vLLM num_accepted_tokens); at '
                                'most draft_tokens. Unit: tokens.'),
            'accepted_per_position': ('a_1..a_K as a JSON array of integers, '
                                      '[70000,40000,16838] (a_i: steps that accepted at least '
                                      'i drafts; non-increasing, summing to A); NULL when not '
                                      'known. Read it with json_each (SQLite) or ::jsonb '
                                      '(PostgreSQL).'),
            'al_stderr': ('The standard error of AL, computed when the row was written by '
                          "Counts.uncertainty (SQLite has no portable SQRT); see the views' "
                          'column. Unit: tokens per step.'),
        }),
    'alembic_version': ('table',
        "Alembic's bookkeeping: the schema revision.",
        {
            'version_num': 'The revision the database is at, e.g. 0005.',
        }),
}


def _literal(text: str | None) -> str:
    """An SQL string literal (or NULL), its colons escaped from SQLAlchemy's bind syntax."""
    if text is None:
        return "NULL"
    return "'" + text.replace("'", "''").replace(":", "\\:") + "'"


def _comment(describe: bool) -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    for name, (kind, text, columns) in COMMENTS.items():
        op.execute(sa.text(f"COMMENT ON {kind.upper()} {name} IS "
                           f"{_literal(text if describe else None)}"))
        for column, words in columns.items():
            op.execute(sa.text(f"COMMENT ON COLUMN {name}.{column} IS "
                               f"{_literal(words if describe else None)}"))


def upgrade() -> None:
    _comment(True)


def downgrade() -> None:
    _comment(False)


def would_lose(connection: sa.engine.Connection) -> list[str]:
    """Nothing: the comments are the catalog's words, which the code still has."""
    return []
