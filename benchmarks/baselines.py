"""The raw baselines the library is measured against, in the same run and on the same data.

- :func:`raw_import`: parse the same files with PyYAML's C loader, then insert the same rows
  (sets, caveats, provenances deduplicated by content, their settings, profiles, rates) into
  the same tables with the driver's ``executemany``, in one transaction. No validation, no
  unchanged detection, no SQLAlchemy: the floor of what an import can cost.
- :func:`raw_resolve`: one parameterized SELECT per request through the driver, on the index the
  resolver uses, plus a second SELECT only when a fallback category is asked for and the first
  found nothing. The answer is the minimum a resolution carries: set, AL, rates, source and
  hardware, or the refusal reason.

Both talk to sqlite3 or psycopg directly; the schema comes from ``registry_db.store.open_registry``
so the tables, indexes and constraints are exactly the library's.
"""

from __future__ import annotations

import hashlib
import sqlite3
import sys
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import yaml

from registry_db.model import setting_text, setting_type
from registry_db.store.urls import dialect_of, sqlite_path

LOADER = yaml.CSafeLoader


@contextmanager
def raw_connection(url: str) -> Iterator[Any]:
    """A bare DB-API connection (sqlite3 or psycopg) for an SQLAlchemy-style registry URL."""
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
    s = pv.get("sampling") or {}
    settings = tuple(sorted((n, setting_type(v), setting_text(v))
                            for n, v in (pv.get("settings") or {}).items()))
    return (pv["source"], pv.get("run"), pv.get("benchmark"), pv.get("prompts"),
            pv.get("hardware"), pv.get("engine_image"), pv.get("tp"), s.get("temperature"),
            s.get("top_p"), s.get("top_k"), s.get("max_tokens"), settings)


def build_rows(paths: Sequence[Path]) -> dict[str, list[tuple]]:
    """Parse ``paths`` with the C loader and lay out every table's rows, ids assigned here."""
    now = datetime.now(timezone.utc).isoformat(sep=" ")
    rows: dict[str, list[tuple]] = {t: [] for t in (
        "profile_sets", "set_caveats", "provenances", "provenance_settings", "profiles",
        "profile_rates")}
    prov_ids: dict[tuple, int] = {}
    by_object: dict[int, int] = {}  # an alias is the same dict: skip re-keying it
    keep_alive = []
    profile_id = 0
    for set_id, path in enumerate(paths, 1):
        data = path.read_bytes()
        doc = yaml.load(data, Loader=LOADER)
        keep_alive.append(doc)
        rows["profile_sets"].append((set_id, doc["name"], str(path),
                                     hashlib.sha256(data).hexdigest(), now))
        rows["set_caveats"].extend((set_id, i, c) for i, c in enumerate(doc.get("caveats") or ()))
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
            rows["profiles"].append((
                profile_id, set_id, pos, p["model"], p["speculative_method"],
                p["num_spec_tokens"], p["thinking"], p["category"],
                float(p["acceptance_length"]), p["method"], prov_id, p.get("rationale"),
                p.get("copied_from")))
            rows["profile_rates"].extend(
                (profile_id, i, float(r)) for i, r in enumerate(p.get("per_position_rates") or (), 1))
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
}


def raw_import(url: str, paths: Sequence[Path]) -> int:
    """Parse ``paths`` and insert their rows with ``executemany`` in one transaction; profiles."""
    rows = build_rows(paths)
    mark = placeholder(url)
    with raw_connection(url) as conn:
        cur = conn.cursor()
        cur.execute("BEGIN")
        for table, cols in _COLUMNS.items():
            if rows[table]:
                marks = ", ".join([mark] * (cols.count(",") + 1))
                cur.executemany(f"INSERT INTO {table} ({cols}) VALUES ({marks})", rows[table])
        cur.execute("COMMIT")
    return len(rows["profiles"])


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
    out = []
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


def main(argv: list[str]) -> int:
    """``baselines.py import URL FOLDER``: the raw import in its own process, as timed."""
    if len(argv) != 3 or argv[0] != "import":
        print("usage: baselines.py import URL FOLDER", file=sys.stderr)
        return 2
    from registry_db.store.urls import normalize_url

    paths = sorted(Path(argv[2]).glob("*.yaml"))
    print(raw_import(normalize_url(argv[1]), paths))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
