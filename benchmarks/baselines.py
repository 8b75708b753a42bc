"""The raw baselines the library is measured against, in the same run and on the same data.

Each is the floor of what its job must cost, written with the same drivers and no SQLAlchemy:

- import: :func:`parse_files` (libyaml's events alone, :func:`parse_events`, the least any YAML
  reader does; or ``yaml.compose`` with PyYAML's C loader, :func:`compose_files`; both with the
  cyclic collector off and each document dropped once read)
  plus :func:`write_rows` (the driver's ``executemany`` of the same rows, ``COPY`` on
  PostgreSQL, into every table an import writes, the history's versions and keys and
  ``import_files`` included, in one transaction; the versions, their rates and the key
  stretches copied from the current rows by ``INSERT ... SELECT``, as the importer copies them,
  which is faster than sending them again on both backends). The rows are laid out beforehand by
  :func:`build_rows` and handed over as a ``marshal`` file, so neither side of the sum
  includes building them: parse + write, nothing else. No validation, no unchanged detection.
- batch resolution, as a process that reads JSON lines and writes JSON lines:
  :func:`batch_join` sends the batch's distinct keys to the database at once (SQLite: a TEMP
  table; PostgreSQL: arrays unnested) and answers every line from one join, the set-based floor;
  :func:`batch_loop` runs one parameterized SELECT per line on the same index. Answers carry the
  minimum a resolution does (set, AL, rates, source, hardware) or the refusal reason.
- :func:`raw_resolve` / :func:`lookup`: the point query alone, for the latency figures.

Both talk to sqlite3 or psycopg directly; the schema comes from ``registry_db.store.open_registry``
so the tables, indexes and constraints are exactly the library's. Run as a script, each baseline
(and, for a like-for-like in-process figure, the library's own import) is one fresh process that
prints its timings as JSON:

    python benchmarks/baselines.py rows FOLDER ROWS.marshal         # lay the rows out once
    python benchmarks/baselines.py import URL FOLDER ROWS.marshal [events|compose]
    python benchmarks/baselines.py ours-import URL FOLDER           # import_paths, timed inside
    python benchmarks/baselines.py batch-join URL IN.jsonl OUT.jsonl
    python benchmarks/baselines.py batch-loop URL IN.jsonl OUT.jsonl
"""

from __future__ import annotations

import hashlib
import json
import marshal
import sqlite3
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Nothing heavy at the top: a baseline process must not pay for imports it does not use (the
# batch baselines load neither PyYAML nor SQLAlchemy; URLs come normalized from the runner).


def dialect_of(url: str) -> str:
    """``sqlite`` or ``postgresql``, from an already normalized URL."""
    return url.split(":", 1)[0].split("+", 1)[0]


def sqlite_path(url: str) -> str:
    """The file of a ``sqlite:///PATH`` URL."""
    return url.split(":///", 1)[1].split("?", 1)[0]


def _loader() -> Any:
    import yaml

    return yaml, yaml.CSafeLoader


@contextmanager
def raw_connection(url: str) -> Iterator[Any]:
    """A bare DB-API connection (sqlite3 or psycopg) for an SQLAlchemy-style registry URL."""
    conn: Any
    if dialect_of(url) == "sqlite":
        conn = sqlite3.connect(sqlite_path(url), isolation_level=None)
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA journal_mode=WAL")
    else:
        import psycopg

        conn = psycopg.connect(pg_conninfo(url), autocommit=True)
    try:
        yield conn
    finally:
        conn.close()


def pg_conninfo(url: str) -> str:
    """A libpq URL from ``postgresql+psycopg://...``."""
    return "postgresql://" + url.split("://", 1)[1]


def placeholder(url: str) -> str:
    """The driver's parameter marker."""
    return "?" if dialect_of(url) == "sqlite" else "%s"


# --- import --------------------------------------------------------------------------------------

def _prov_key(pv: dict) -> tuple:
    from registry_db.model import setting_text, setting_type

    s = pv.get("sampling") or {}
    settings = tuple(sorted((n, setting_type(v), setting_text(v))
                            for n, v in (pv.get("settings") or {}).items()))
    return (pv["source"], pv.get("run"), pv.get("benchmark"), pv.get("prompts"),
            pv.get("hardware"), pv.get("engine_image"), pv.get("tp"), s.get("temperature"),
            s.get("top_p"), s.get("top_k"), s.get("max_tokens"), settings)


def build_rows(paths: Sequence[Path]) -> dict[str, list[tuple]]:
    """Parse ``paths`` with the C loader and lay out every table's rows, ids assigned here."""
    yaml, loader = _loader()
    now = datetime.now(UTC).isoformat(sep=" ")
    rows: dict[str, list[tuple]] = {t: [] for t in _COLUMNS}
    prov_ids: dict[tuple, int] = {}
    by_object: dict[int, int] = {}  # an alias is the same dict: skip re-keying it
    keep_alive = []
    profile_id = 0
    for set_id, path in enumerate(paths, 1):
        data = path.read_bytes()
        doc = yaml.load(data, Loader=loader)
        keep_alive.append(doc)
        digest = hashlib.sha256(data).hexdigest()
        rows["profile_sets"].append((set_id, doc["name"], str(path), digest, now))
        # The import's revision 1 of the set, and what the file's bytes held (import_files).
        rows["revisions"].append((set_id, doc["name"], 1, "added", now, str(path), digest,
                                  len(doc["profiles"])))
        rows["import_files"].append((str(path), digest, digest, doc["name"], digest,
                                     len(doc["profiles"])))
        caveats = [(set_id, i, c) for i, c in enumerate(doc.get("caveats") or ())]
        rows["set_caveats"].extend(caveats)
        rows["revision_caveats"].extend(caveats)
        for pos, p in enumerate(doc["profiles"]):
            profile_id += 1
            pv = p.get("provenance")
            prov_id = None
            if pv is not None:
                prov_id = by_object.get(id(pv))
                if prov_id is None:
                    key = _prov_key(pv)
                    prov_id = prov_ids.get(key)
                    if prov_id is None:
                        prov_id = prov_ids[key] = len(prov_ids) + 1
                        rows["provenances"].append(
                            (prov_id, hashlib.sha256(repr(key).encode()).hexdigest()) + key[:11])
                        rows["provenance_settings"].extend(
                            (prov_id, n, text, typ) for n, typ, text in key[11])
                    by_object[id(pv)] = prov_id
            row = (profile_id, set_id, pos, p["model"], p["speculative_method"],
                   p["num_spec_tokens"], p["thinking"], p["category"],
                   float(p["acceptance_length"]), p["method"], prov_id, p.get("rationale"),
                   p.get("copied_from"))
            rows["profiles"].append(row)
            # The set's revision 1 opens a key stretch and a version of each profile (the
            # version in the stretch of the same id).
            rows["profile_keys"].append((profile_id, doc["name"]) + row[3:8] + (now, None))
            rows["profile_versions"].append((profile_id, doc["name"], 1, None, now, None)
                                            + row[2:] + (profile_id,))
            rates = [(profile_id, i, float(r))
                     for i, r in enumerate(p.get("per_position_rates") or (), 1)]
            rows["profile_rates"].extend(rates)
            rows["version_rates"].extend(rates)
    return rows


_COLUMNS = {
    "profile_sets": "id, name, source_file, content_hash, imported_at",
    "set_caveats": "set_id, position, text",
    "provenances": "id, content_hash, source, run, benchmark, prompts, hardware, engine_image, "
                   "tp, temperature, top_p, top_k, max_tokens",
    "provenance_settings": "provenance_id, name, value, value_type",
    "profiles": "id, set_id, position, model, speculative_method, num_spec_tokens, thinking, "
                "category, acceptance_length, method, provenance_id, rationale, copied_from",
    "profile_rates": "profile_id, position, rate",
    "revisions": "id, set_name, revision, action, imported_at, source_file, content_hash, "
                 "profile_count",
    "revision_caveats": "revision_id, position, text",
    "profile_keys": "id, set_name, model, speculative_method, num_spec_tokens, thinking, "
                    "category, valid_from, valid_until",
    "profile_versions": "id, set_name, first_revision, last_revision, valid_from, valid_until, "
                        "position, model, speculative_method, num_spec_tokens, thinking, "
                        "category, acceptance_length, method, provenance_id, rationale, "
                        "copied_from, key_id",
    "version_rates": "profile_id, position, rate",
    "import_files": "path, bytes_hash, rules, set_name, content_hash, profiles",
}


def raw_import(url: str, paths: Sequence[Path]) -> int:
    """Load ``paths`` (``yaml.load``) and write their rows (:func:`write_rows`); profiles.

    Fills a registry for the resolution benchmarks; not itself a timed baseline.
    """
    return write_rows(url, build_rows(paths))


# --- resolution ----------------------------------------------------------------------------------

LOOKUP = """
SELECT s.name, p.acceptance_length, pv.source, pv.hardware, r.position, r.rate
FROM profiles p
JOIN profile_sets s ON s.id = p.set_id
LEFT JOIN provenances pv ON pv.id = p.provenance_id
LEFT JOIN profile_rates r ON r.profile_id = p.id
WHERE p.model = {m} AND p.speculative_method = {m} AND p.num_spec_tokens = {m}
  AND p.thinking = {m} AND p.category = {m}
ORDER BY s.name, r.position
"""


def raw_resolve(url: str, requests: Iterable[dict]) -> list[dict]:
    """Answer each request (the ``--batch`` line form) with one indexed SELECT through the driver.

    Only the registry layer with an optional ``sets`` list and ``pin.fallback_category``: what
    the benchmark's requests use.
    """
    sql = lookup_sql(url)
    out: list[dict[str, Any]] = []
    with raw_connection(url) as conn:
        cur = conn.cursor()
        for req in requests:
            sets = req.get("sets")
            found = lookup(cur, sql, req, req["category"], sets)
            fallback = (req.get("pin") or {}).get("fallback_category")
            if not found and fallback:
                found = lookup(cur, sql, req, fallback, sets)
                if not found:
                    out.append({"refused": "fallback_no_match"})
                    continue
            if not found:
                out.append({"refused": "no_match"})
            elif len(found) > 1:
                out.append({"refused": "conflict"})
            else:
                (name, (al, source, hardware, rates)), = found.items()
                out.append({"profile_set": name, "acceptance_length": al, "source": source,
                            "hardware": hardware, "per_position_rates": rates or None})
    return out


def lookup_sql(url: str) -> str:
    """The baseline's one SELECT, with the driver's parameter markers."""
    return LOOKUP.format(m=placeholder(url))


def lookup(cur: Any, sql: str, req: dict, category: str,
           sets: Sequence[str] | None) -> dict[str, tuple]:
    """Run the SELECT for ``req`` at ``category``: ``{set: (AL, source, hardware, rates)}``."""
    cur.execute(sql, (req["model"], req["method"], req["k"], req["thinking"], category))
    found: dict[str, tuple] = {}
    for name, al, source, hardware, _pos, rate in cur.fetchall():
        if sets is not None and name not in sets:
            continue
        entry = found.setdefault(name, (al, source, hardware, []))
        if rate is not None:
            entry[3].append(rate)
    return found


def compose_files(paths: Sequence[Path]) -> int:
    """``yaml.compose`` every file with the C loader, one at a time; the nodes composed.

    Each document is dropped once composed, before the next is read, and the cyclic collector
    is off: this is the cost of parsing, not of holding or of walking a growing heap.
    """
    yaml, loader = _loader()
    nodes = 0
    with _collector_off():
        for path in paths:
            doc = yaml.compose(path.read_bytes(), Loader=loader)
            nodes += len(doc.value)
            del doc
    return nodes


def parse_events(paths: Sequence[Path]) -> int:
    """libyaml's events of every file (``yaml.parse`` with the C loader), nothing built; the
    events seen. The least any YAML reader can do."""
    yaml, loader = _loader()
    events = 0
    with _collector_off():
        for path in paths:
            for _event in yaml.parse(path.read_bytes(), Loader=loader):
                events += 1
    return events


#: The import baseline's parse: ``events`` (the floor) or ``compose`` (nodes built too).
PARSERS = {"events": parse_events, "compose": compose_files}


def parse_files(paths: Sequence[Path], parser: str = "events") -> dict[str, Any]:
    """One parse floor over ``paths``, timed (one per process, so its wall time is its own)."""
    _, cpu, wall = _timed(PARSERS[parser], paths)
    return {"parser": parser, "parse_cpu_s": cpu, "parse_s": wall}


@contextmanager
def _collector_off() -> Iterator[None]:
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


#: The history tables a first import fills with copies of the current rows: the floor may copy
#: them in the database (``INSERT ... SELECT``, as the importer does) instead of sending them.
_COPIES = {
    "profile_versions": "SELECT p.id, s.name, 1, NULL, {at}, NULL, p.position, p.model, "
                        "p.speculative_method, p.num_spec_tokens, p.thinking, p.category, "
                        "p.acceptance_length, p.method, p.provenance_id, p.rationale, "
                        "p.copied_from, p.id "
                        "FROM profiles p JOIN profile_sets s ON s.id = p.set_id",
    "profile_keys": "SELECT p.id, s.name, p.model, p.speculative_method, p.num_spec_tokens, "
                    "p.thinking, p.category, {at}, NULL FROM profiles p "
                    "JOIN profile_sets s ON s.id = p.set_id",
    "version_rates": "SELECT profile_id, position, rate FROM profile_rates",
}

#: How the floor writes the history tables: sent like the rest, or copied in the database.
HISTORY_WAYS = ("sent", "copied")


def write_rows(url: str, rows: dict[str, list[tuple]], history: str = "copied") -> int:
    """Insert prepared ``rows``, every table in one transaction; profiles. The driver's fastest
    bulk path: ``executemany`` on SQLite, ``COPY`` on PostgreSQL (psycopg's ``executemany``
    sends a statement per row; the library's import copies too). ``history="copied"`` fills
    the versions, their rates and the key stretches by ``INSERT ... SELECT`` from the rows just
    written (the same rows: a version's id is its profile's)."""
    mark = placeholder(url)
    with raw_connection(url) as conn:
        cur = conn.cursor()
        cur.execute("BEGIN")
        for table, cols in _COLUMNS.items():
            if not rows[table]:
                continue
            if history == "copied" and table in _COPIES:
                # The one time the copied rows carry (their valid_from), as the rows give it.
                at = {"profile_versions": 4, "profile_keys": 7}.get(table)
                cur.execute(f"INSERT INTO {table} ({cols}) " + _COPIES[table].format(at=mark),
                            () if at is None else (rows[table][0][at],))
                continue
            if dialect_of(url) == "postgresql":
                with cur.copy(f"COPY {table} ({cols}) FROM STDIN") as copy:
                    for row in rows[table]:
                        copy.write_row(row)
            else:
                marks = ", ".join([mark] * (cols.count(",") + 1))
                cur.executemany(f"INSERT INTO {table} ({cols}) VALUES ({marks})", rows[table])
        cur.execute("COMMIT")
    return len(rows["profiles"])


def _timed(fn: Any, *args: Any) -> tuple[Any, float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn(*args)
    return out, time.process_time() - cpu, time.perf_counter() - wall


def compose_and_write(url: str, folder: Path, rows_file: Path,
                      parser: str = "events") -> dict[str, Any]:
    """The import baseline in this process: parse every file, then write the prepared rows."""
    paths = sorted(folder.glob("*.yaml"))
    parse = parse_files(paths, parser)
    # Loaded after parsing, untimed: building the rows is not part of either floor.
    rows = marshal.loads(rows_file.read_bytes())
    n, write_cpu, write_s = _timed(write_rows, url, rows)
    return {"profiles": n, **parse, "write_cpu_s": write_cpu, "write_s": write_s,
            "cpu_s": parse["parse_cpu_s"] + write_cpu, "wall_s": parse["parse_s"] + write_s}


def ours_import(url: str, folder: Path) -> dict[str, Any]:
    """The library's ``import_paths`` in this process, timed the way the baseline is, with the
    collector paused as the command pauses it."""
    from registry_db import store
    from registry_db.gcpause import gc_paused
    from registry_db.importing.write import import_paths

    engine = store.open_registry(url)
    try:
        with gc_paused():  # as `registry import` runs it: the pause is the command's
            report, cpu, wall = _timed(import_paths, engine, [folder])
    finally:
        engine.dispose()
    return {"profiles": sum(s.profiles for s in report.sets), "cpu_s": cpu, "wall_s": wall}


# --- batch resolution as a process: JSON lines in, JSON lines out ------------------------------

_JOIN_SELECT = """SELECT t.id, s.name, p.acceptance_length, pv.source, pv.hardware, r.position,
       r.rate
FROM {keys}
JOIN profiles p ON p.model = t.model AND p.speculative_method = t.method
  AND p.num_spec_tokens = t.k AND p.thinking = t.thinking AND p.category = t.category
JOIN profile_sets s ON s.id = p.set_id
LEFT JOIN provenances pv ON pv.id = p.provenance_id
LEFT JOIN profile_rates r ON r.profile_id = p.id
ORDER BY t.id, s.name, r.position"""


def _join_lookup(conn: Any, url: str, keys: list[tuple]) -> dict[tuple, dict[str, tuple]]:
    """``{key: {set: (AL, source, hardware, rates)}}`` for every key, from one join."""
    cur = conn.cursor()
    if dialect_of(url) == "sqlite":
        cur.execute("CREATE TEMP TABLE k (id INTEGER PRIMARY KEY, model TEXT, method TEXT, "
                    "k INTEGER, thinking TEXT, category TEXT)")
        cur.executemany("INSERT INTO temp.k VALUES (?, ?, ?, ?, ?, ?)",
                        [(i,) + key for i, key in enumerate(keys)])
        cur.execute(_JOIN_SELECT.format(keys="temp.k t"))
    else:
        cols = [list(c) for c in zip(*keys)] if keys else [[]] * 5
        cur.execute(_JOIN_SELECT.format(
            keys="unnest(%s::int[], %s::text[], %s::text[], %s::int[], %s::text[], %s::text[])"
                 " AS t(id, model, method, k, thinking, category)"),
            [list(range(len(keys)))] + cols)
    found: dict[tuple, dict[str, tuple]] = {}
    for kid, name, al, source, hardware, _pos, rate in cur.fetchall():
        entry = found.setdefault(keys[kid], {}).setdefault(name, (al, source, hardware, []))
        if rate is not None:
            entry[3].append(rate)
    return found


def _answer(found: dict[str, tuple], sets: Sequence[str] | None) -> dict | None:
    if sets is not None:
        found = {n: v for n, v in found.items() if n in sets}
    if not found:
        return None
    if len(found) > 1:
        return {"refused": "conflict"}
    (name, (al, source, hardware, rates)), = found.items()
    return {"profile_set": name, "acceptance_length": al, "source": source,
            "hardware": hardware, "per_position_rates": rates or None}


def batch_join(url: str, lines: Sequence[str]) -> list[str]:
    """Answer JSON lines set-based: the batch's distinct keys, one join, one answer per line."""
    reqs = [json.loads(line) for line in lines]
    wanted: set[tuple] = set()
    for r in reqs:
        prefix = (r["model"], r["method"], r["k"], r["thinking"])
        wanted.add(prefix + (r["category"],))
        fallback = (r.get("pin") or {}).get("fallback_category")
        if fallback:
            wanted.add(prefix + (fallback,))
    keys = sorted(wanted)
    with raw_connection(url) as conn:
        found = _join_lookup(conn, url, keys)
    out = []
    for r in reqs:
        prefix = (r["model"], r["method"], r["k"], r["thinking"])
        sets = r.get("sets")
        answer = _answer(found.get(prefix + (r["category"],), {}), sets)
        fallback = (r.get("pin") or {}).get("fallback_category")
        if answer is None and fallback:
            answer = _answer(found.get(prefix + (fallback,), {}), sets) or {
                "refused": "fallback_no_match"}
        out.append(json.dumps(answer or {"refused": "no_match"}))
    return out


def batch_loop(url: str, lines: Sequence[str]) -> list[str]:
    """Answer JSON lines with one point query per line (:func:`raw_resolve`)."""
    return [json.dumps(a) for a in raw_resolve(url, [json.loads(line) for line in lines])]


def _batch_main(fn: Any, url: str, src: str, dst: str) -> dict[str, Any]:
    lines = Path(src).read_text(encoding="utf-8").splitlines()
    out, cpu, wall = _timed(fn, url, lines)
    Path(dst).write_text("\n".join(out) + "\n", encoding="utf-8")
    return {"requests": len(out), "cpu_s": cpu, "wall_s": wall}


def main(argv: list[str]) -> int:
    """The baselines (and the library's in-process import) as fresh processes; see the docstring.

    URLs are SQLAlchemy-style and normalized (``sqlite:///PATH``, ``postgresql+psycopg://...``).
    """
    usage = ("usage: baselines.py rows FOLDER OUT | import URL FOLDER ROWS [events|compose] | "
             "ours-import URL "
             "FOLDER | batch-join URL IN OUT | batch-loop URL IN OUT")
    if not argv:
        print(usage, file=sys.stderr)
        return 2
    what, args = argv[0], argv[1:]
    if what == "rows" and len(args) == 2:
        rows = build_rows(sorted(Path(args[0]).glob("*.yaml")))
        Path(args[1]).write_bytes(marshal.dumps(rows))
        result: dict[str, Any] = {"profiles": len(rows["profiles"])}
    elif what == "import" and len(args) in (3, 4):
        result = compose_and_write(args[0], Path(args[1]), Path(args[2]), *args[3:])
    elif what == "ours-import" and len(args) == 2:
        result = ours_import(args[0], Path(args[1]))
    elif what in ("batch-join", "batch-loop") and len(args) == 3:
        fn = batch_join if what == "batch-join" else batch_loop
        result = _batch_main(fn, args[0], args[1], args[2])
    else:
        print(usage, file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
