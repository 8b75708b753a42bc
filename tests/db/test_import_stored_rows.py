"""What an import stores does not depend on how the importer holds the sets in between: a varied
corpus (the seed, every valid test file, a generated registry with aliases, rates, counts and
shared keys), imported in three rounds (added; updated, moved and pruned; one set through the
library), leaves the very rows recorded in ``tests/data/stored_rows.json`` — values, content
hashes, revisions, history ranges, provenances, the unchanged-file records — and the same
reports and warnings.

The recorded digests were written by the importer that kept every set in memory (main at
d96572f) through ``REGISTRY_WRITE_STORED_ROWS=1``; rewrite them that way only for a change that
means to store something else. Surrogate ids are compared by their order (each id replaced by its
rank in its table, foreign keys too), so the figures do not depend on where a sequence starts;
times are left out (each import stamps its own), and so is ``import_files.rules``, the digest of
the reading rules' source, which any edit of those modules changes by design.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

from sqlalchemy import DateTime, select

from registry_db.importing import write as importer
from registry_db.store.schema import metadata

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "tests" / "data" / "stored_rows.json"
sys.path.insert(0, str(ROOT / "benchmarks"))
import generate  # noqa: E402

#: Columns left out of the comparison (see the module's docstring), and what came after the
#: recording: 0012's git provenance (nothing outside a work tree) and its label tables.
SKIPPED = {"import_files.rules", "revisions.git_commit", "revisions.git_dirty",
           "revisions.git_path"}
LATER_TABLES = {"labels", "label_events"}


def _corpus(tmp: Path, round_: int) -> list[Path]:
    """The files of one round: round 2 changes the generated values and one count (a drift),
    moves a seed file and drops the test files (pruned)."""
    folder = tmp / f"round{round_}"
    gen = folder / "generated"
    generate.write_registry(generate.default_layout(1_200, 4, seed=round_), gen)
    seed = folder / ("seed" if round_ == 1 else "seed-moved")
    shutil.copytree(ROOT / "seed" / "acceptance", seed)
    files = [gen, seed]
    if round_ == 1:
        valid = folder / "valid"
        # Its set is the seed's own: one file may declare it.
        shutil.copytree(ROOT / "tests" / "data" / "valid", valid,
                        ignore=shutil.ignore_patterns("inferencex-golden-al.yaml"))
        files.append(valid)
    else:
        counts = (ROOT / "tests" / "data" / "valid" / "counts.yaml").read_text()
        changed = counts.replace(
            "acceptance_length: 2.5074\n    counts: {drafts: 84142, draft_tokens: 252426, "
            "accepted_tokens: 126838}",
            "acceptance_length: 2.6\n    counts: {drafts: 84142, draft_tokens: 252426, "
            "accepted_tokens: 134630}")
        assert changed != counts
        (folder / "counts.yaml").write_text(changed)
        files.append(folder / "counts.yaml")
    return files


def _rows(engine) -> dict[str, list[list]]:
    """Every table's rows by primary key, ids as ranks, times and :data:`SKIPPED` left out."""
    ranks: dict[str, dict[int, int]] = {}
    out = {}
    with engine.connect() as conn:
        for table in metadata.sorted_tables:  # parents before children
            if table.name in LATER_TABLES:
                continue
            keys = list(table.primary_key.columns)
            rows = conn.execute(select(table).order_by(*keys)).mappings().all()
            if [c.name for c in keys] == ["id"]:
                ranks[table.name] = {r["id"]: i for i, r in enumerate(rows)}
            refs = {fk.parent.name: fk.column.table.name for fk in table.foreign_keys
                    if fk.column.name == "id"}
            cols = [c.name for c in table.columns if not isinstance(c.type, DateTime)
                    and f"{table.name}.{c.name}" not in SKIPPED]
            out[table.name] = [
                [ranks[table.name][r[c]] if c == "id" and table.name in ranks
                 else ranks[refs[c]][r[c]] if c in refs and r[c] is not None else r[c]
                 for c in cols] for r in rows]
    return out


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=repr).encode()).hexdigest()


def _report(report) -> list:
    return [report.to_json(), [f.message for f in report.warnings]]


def test_stored_rows_are_the_recorded_ones(engine, backend, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the files' paths, stored as given, are relative
    tmp = Path(".")
    reports = [_report(importer.import_paths(engine, _corpus(tmp, 1), message="first"))]
    reports.append(_report(importer.import_paths(engine, _corpus(tmp, 2), prune=True,
                                                 message="second")))
    shutil.copy(ROOT / "tests" / "data" / "valid" / "aliases.yaml", "aliases.yaml")
    sets, _ = importer.load_paths(["aliases.yaml"])
    reports.append(_report(importer.import_sets(engine, sets, message="third")))
    rows = _rows(engine)
    got = {"reports": _digest(reports),
           "tables": {name: [len(r), _digest(r)] for name, r in rows.items()}}
    # The corpus exercises what it claims to: updates, drift, overlaps, history, deletions.
    statuses = {s["status"] for r in reports for s in r[0]["sets"]}
    assert statuses == {"added", "updated", "unchanged", "deleted"}, statuses
    messages = " ".join(m for r in reports for m in r[1])
    assert "value_drift" in messages or "moves from" in messages
    assert "share" in messages
    assert all(rows[t] for t in ("profile_versions", "version_rates", "version_counts",
                                 "provenance_settings", "import_files", "revision_caveats"))
    recorded = json.loads(RECORDED.read_text()) if RECORDED.exists() else {}
    if os.environ.get("REGISTRY_WRITE_STORED_ROWS"):
        recorded[backend] = got
        RECORDED.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    assert got["tables"] == recorded[backend]["tables"]
    assert got == recorded[backend]
