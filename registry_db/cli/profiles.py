"""``registry profiles``: the stored profiles, one row each, filtered by key and set.

Browsing without SQL: what AL and rate the registry holds for a model, method, K, thinking mode
or category, in which set and from which source. Thin over
:func:`registry_db.store.read.list_profiles` (and, as of a time,
:func:`registry_db.history.profiles_as_of`); rows are ordered by profile key, then set, so
the output can be diffed and tested.
"""

from __future__ import annotations

from typing import Any

import click

from registry_db.cli.output import (
    as_of_option,
    complete_methods,
    complete_models,
    complete_set_names,
    emit_rows,
    handle_errors,
    labelled_time,
    output_options,
    table_options,
    uncertainty_json,
    with_stderr,
)
from registry_db.model import MAX_K, THINKING_MODES

#: The readable table's columns; --json and --csv also carry the key's five fields apart, and
#: the counts (--json as the mapping and the uncertainty, --csv as acceptance_profiles' columns).
TABLE_COLUMNS = ("profile", "acceptance_length", "acceptance_rate", "method", "set", "source")
#: The key's columns the filters --model, --method, --k, --thinking and --category read.
KEY_FILTERS = ("model", "speculative_method", "num_spec_tokens", "thinking", "category")
FULL_COLUMNS = ("profile", "model", "speculative_method", "num_spec_tokens", "thinking",
                "category", "acceptance_length", "acceptance_rate", "method", "set", "source")
JSON_COLUMNS = (*FULL_COLUMNS, "counts", "uncertainty")
CSV_COLUMNS = (*FULL_COLUMNS, "drafts", "draft_tokens", "accepted_tokens", "al_stderr",
               "al_stderr_exact")


@click.command("profiles")
@click.option("--model", metavar="M", shell_complete=complete_models, help="Only this model.")
@click.option("--method", metavar="X", shell_complete=complete_methods,
              help="Only this speculative method, e.g. dspark, mtp.")
@click.option("--k", type=click.IntRange(min=1, max=MAX_K), metavar="K",
              help=f"Only this K (1 to {MAX_K}).")
@click.option("--thinking", type=click.Choice(THINKING_MODES), help="Only this thinking mode.")
@click.option("--category", metavar="C", help="Only this category.")
@click.option("--set", "sets", multiple=True, metavar="NAME", shell_complete=complete_set_names,
              help="Only profiles of this set (repeat for several).")
@as_of_option
@output_options
@table_options
@click.pass_obj
@handle_errors
def profiles(settings: Any, model: str | None, method: str | None, k: int | None,
             thinking: str | None, category: str | None, sets: tuple[str, ...],
             as_of: Any, as_json: bool, as_csv: bool, as_nl: bool) -> None:
    """List stored profiles, one row each: AL, rate, method, set and source.

    Filters combine (all must hold); none lists every profile. The rate is (AL - 1) / K. A
    profile stored with counts shows its AL with the standard error, `2.51 ± 0.0034` (`± ≤S`
    when the counts give only the bound). The table rounds numbers for reading; --json and
    --csv add the key's five fields and the counts as columns, and --json keeps every digit.
    A --set that is not in the database exits 1 and names the known sets; filters that match
    nothing say so on stderr, with what the registry holds. --as-of TIME lists the profiles
    the registry held then.

    \b
    Example:
        registry profiles --model deepseek-v4.1-flash --method dspark
        registry profiles --k 5 --thinking off --category coding --json
        registry profiles --set inferencex-golden-al --csv > profiles.csv
    """
    filters: dict[str, Any] = {"model": model, "method": method, "k": k,
                               "thinking": thinking, "category": category,
                               "sets": sets or None}
    given = {c: v for c, v in zip(KEY_FILTERS, (model, method, k, thinking, category))
             if v is not None}
    found = None
    if as_of is None:
        from registry_db.cli.fast import read_cursor
        from registry_db.store import dbapi_read

        with read_cursor(settings.url) as (cur, dialect, engine):
            if engine is None:
                found = dbapi_read.list_profiles(cur, dialect, **filters)
    if found is None or (not found and given):
        # As of a time, a registry the DB-API reader did not open, or nothing matched (the
        # message reads what the registry holds): the SQLAlchemy readers.
        found = _with_engine(settings, filters, given, tuple(sets), as_of)
    if as_json or as_nl:
        emit_rows(JSON_COLUMNS, [(
            p.label, *p.key, p.acceptance_length, p.acceptance_rate, p.method, p.profile_set,
            p.source, None if p.counts is None else p.counts.to_json(),
            uncertainty_json(p.uncertainty)) for p in found], as_json=as_json, as_nl=as_nl)
        return
    if as_csv:
        emit_rows(CSV_COLUMNS, [(
            p.label, *p.key, p.acceptance_length, p.acceptance_rate, p.method, p.profile_set,
            p.source, *_csv_counts(p)) for p in found], as_csv=True)
        return
    emit_rows(TABLE_COLUMNS, [(p.label, with_stderr(p.acceptance_length, p.uncertainty),
                               p.acceptance_rate, p.method, p.profile_set, p.source)
                              for p in found])


def _with_engine(settings: Any, filters: dict[str, Any], given: dict[str, Any],
                 sets: tuple[str, ...], as_of: Any) -> list[Any]:
    """The profiles through an engine, and why none matched the filters ``given`` (stderr)."""
    from registry_db.history import profiles_as_of
    from registry_db.store.read import list_profiles

    with settings.registry(readonly=True) as engine:
        as_of = labelled_time(engine, as_of)
        found = (list_profiles(engine, **filters) if as_of is None
                 else profiles_as_of(engine, as_of, **filters))
        if not found and given:
            from registry_db.analyze.coverage import no_match_message

            click.echo(no_match_message(engine, given, sets, as_of), err=True)
    return found


def _csv_counts(p: Any) -> tuple[Any, ...]:
    """drafts, draft_tokens, accepted_tokens, al_stderr, al_stderr_exact (empty without)."""
    u = p.uncertainty
    if p.counts is None or u is None:
        return (None,) * 5
    return (p.counts.drafts, p.counts.draft_tokens, p.counts.accepted_tokens, u.stderr,
            int(u.exact))
