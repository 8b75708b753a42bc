"""Issue 30's figures in one run on one tree: every ratio README's performance table quotes.

Calls the existing harnesses, one after the other, and writes one JSON (after each step, so an
interrupted run keeps what it measured) and the table:

- ``measure.bench_import`` per backend (``imports.py``'s step): ``registry import`` of
  ``--profiles`` in ``--files`` against the honest floor, in process too, and the re-import of
  the unchanged folder against the fresh import;
- ``measure.bench_batch`` on that registry: ``--batch-lines`` lines against the set-based join;
- ``measure.bench_cli``: one ``registry resolve --json`` against ``python -c "import sqlite3"``;
- ``pg_commands.pair``: the same ``resolve --json`` on PostgreSQL and on SQLite, in turn;
- one ``--peak-lines`` batch per backend (``batch_stream.throughput``): its peak RSS;
- ``as_of.grow``: ``--grow-profiles`` imported ``--grow`` times, 5% changed per round: growth per
  revision against the first import, the rounds' writes and CPU, as of against now at depth R.

    python benchmarks/round.py --out benchmarks/published/2026-12-01-round3-figures.json
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import as_of  # noqa: E402
import batch_stream  # noqa: E402
import generate  # noqa: E402
import measure  # noqa: E402
import pg_commands  # noqa: E402
import run  # noqa: E402
from backends import Backend, default_postgres_url, git_revision, machine  # noqa: E402

HERE = Path(__file__).resolve().parent
BACKENDS = ("sqlite", "postgresql")

#: Issue 30's "Done when" (and issue 14's batch and CLI targets): the ratio must be at most this.
TARGETS = {"import": 1.8, "reimport": 0.1, "batch": 1.3, "peak_mib": 300.0, "cli": 4.0,
           "pg_vs_sqlite": 2.0, "growth": 0.15, "rounds": 1.2, "as_of_one": 1.3,
           "as_of_batch": 1.5}


def _get(record: dict, *path: Any) -> Any:
    """``record[p0][p1]...``, or ``None`` where any step is missing (a step not run)."""
    for key in path:
        if not isinstance(record, dict) or key not in record:
            return None
        record = record[key]
    return record


def _cell(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:,.0f} {unit}".strip() if unit else f"{value:.2f}"


def _met(values: list[float | None], target: float) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return "not measured"
    return "yes" if all(v <= target for v in got) else "no"


def summary_rows(record: dict) -> list[list[str]]:
    """The table: figure, SQLite, PostgreSQL, target, met? (every backend's value within)."""
    s = record.get("steps", {})
    depth = str(_get(record, "sizes", "grow"))

    def both(*path: Any) -> list[float | None]:
        return [_get(s, b, *path) for b in BACKENDS]

    grow_one = [_get(s, b, "grow", "depths", depth, "single", "ratio", "engine/as_of_first")
                for b in BACKENDS]
    sqlite3_one = _get(s, "sqlite", "grow", "depths", depth, "single", "ratio",
                       "sqlite3/as_of_first")
    rows: list[tuple[str, list[float | None], str, float, str]] = [
        ("`registry import`, whole process ÷ the floor (wall)", both("import", "ratio"), "",
         TARGETS["import"], "≤ 1.8"),
        ("`import_paths` in process ÷ the floor in process (CPU)",
         both("import", "inproc", "ratio_cpu"), "", TARGETS["import"], "≤ 1.8"),
        ("`registry import` again, unchanged ÷ the fresh import (wall)",
         both("import", "reimport_ratio"), "", TARGETS["reimport"], "≤ 0.1"),
        ("`resolve --batch` ÷ the set-based join (wall)", both("batch", "ratio"), "",
         TARGETS["batch"], "≤ 1.3"),
        ("`resolve --batch` of the peak lines, peak RSS (MiB)", both("peak", "peak_rss_mib"),
         "MiB", TARGETS["peak_mib"], "≤ 300 MiB"),
        ("one `resolve --json` ÷ `python -c \"import sqlite3\"` (wall)",
         [_get(s, "sqlite", "cli", "ratio"), None], "", TARGETS["cli"], "≤ 4 (SQLite)"),
        ("one `resolve --json`, PostgreSQL ÷ SQLite (wall)",
         [None, _get(s, "pg_vs_sqlite", "ratio_wall")], "", TARGETS["pg_vs_sqlite"], "≤ 2"),
        (f"DB growth per revision ÷ the first import's size ({depth} revisions)",
         both("grow", "growth_per_revision_vs_first"), "", TARGETS["growth"], "≤ 0.15"),
        ("import's CPU, last five rounds ÷ the second (median of it and 4 repeats)",
         both("grow", "last_five_median_vs_second", "cpu"), "", TARGETS["rounds"], "≤ 1.2"),
        ("import's bytes written, last five rounds ÷ the second",
         [_get(s, "sqlite", "grow", "last_five_median_vs_second", "written"), None], "",
         TARGETS["rounds"], "≤ 1.2 (SQLite's writes)"),
        (f"one as-of resolution ÷ a current one ({depth} revisions)", grow_one, "",
         TARGETS["as_of_one"], "≤ 1.3"),
        (f"one as-of resolution ÷ current, `sqlite3` read path ({depth} revisions)",
         [sqlite3_one, None], "", TARGETS["as_of_one"], "≤ 1.3"),
        (f"as-of batch ÷ current batch, hits ({depth} revisions)",
         both("grow", "depths", depth, "batch_ratio", "hits"), "", TARGETS["as_of_batch"],
         "≤ 1.5"),
        (f"as-of batch ÷ current batch, misses ({depth} revisions)",
         both("grow", "depths", depth, "batch_ratio", "misses"), "", TARGETS["as_of_batch"],
         "≤ 1.5"),
    ]
    return [[name, *(_cell(v, unit) for v in values), target_text, _met(values, target)]
            for name, values, unit, target, target_text in rows]


def markdown(record: dict) -> str:
    head = ["figure", "SQLite", "PostgreSQL", "target", "met?"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in summary_rows(record)])


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def _save(record: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8")


def _step(record: dict, out: Path, backend: str, name: str, fn: Any) -> None:
    """Run one measurement, keep it (or its error) in the record, save the record."""
    start = time.perf_counter()
    print(f"[{backend}] {name} ...", file=sys.stderr, flush=True)
    try:
        got = fn()
    except Exception as exc:  # noqa: BLE001 - the other steps still count
        got = {"error": f"{type(exc).__name__}: {exc}"}
    got["took_s"] = round(time.perf_counter() - start, 1)
    record["steps"].setdefault(backend, {})[name] = got
    print(f"[{backend}] {name}: {got['took_s']} s", file=sys.stderr, flush=True)
    _save(record, out)


def measure_all(args: argparse.Namespace, record: dict, work: Path) -> None:
    """Every step (module docstring), both backends' registries alive until the pair ran."""
    layout, folder = run.registry_folder(args.work_dir, args.profiles, args.files)
    lines = list(generate.requests(layout, args.batch_lines))
    hit = next(generate.hit_requests(layout, 1))
    urls: dict[str, str] = {}
    backends: list[Backend] = []
    try:
        for name in BACKENDS:
            backend = Backend(name, work, args.postgres_url)
            backends.append(backend)

            def imp(backend: Backend = backend, name: str = name) -> dict:
                got, urls[name] = measure.bench_import(backend, folder, args.repeats)
                return got

            _step(record, args.out, name, "import", imp)
            if name not in urls:
                continue
            url = urls[name]
            _step(record, args.out, name, "batch", lambda url=url: measure.bench_batch(
                url, lines, args.repeats, work))
            if name == "sqlite":
                _step(record, args.out, name, "cli", lambda url=url: measure.bench_cli(
                    url, hit, args.cli_repeats))
        if len(urls) == 2:
            argv = pg_commands.commands(work, layout)["resolve --json"]
            _step(record, args.out, "pg_vs_sqlite", "resolve --json",
                  lambda: pg_commands.pair("resolve --json", argv, urls, args.cli_repeats,
                                           pg_commands._env(None)))
            record["steps"]["pg_vs_sqlite"] = record["steps"]["pg_vs_sqlite"]["resolve --json"]
        peak = work / "batch-peak.jsonl"
        with peak.open("w", encoding="utf-8") as fh:
            for line in generate.requests(layout, args.peak_lines):
                fh.write(json.dumps(line) + "\n")
        for name, url in urls.items():
            _step(record, args.out, name, "peak", lambda url=url: batch_stream.throughput(
                None, url, peak, Path(os.devnull)))
        peak.unlink()
    finally:
        for backend in backends:
            backend.close()
    grow_layout, grow_folder = run.registry_folder(args.work_dir, args.grow_profiles,
                                                   args.grow_files)
    # A database of this run's own, created and dropped here (as_of's default name is shared).
    as_of.PG_DATABASE = f"registry_bench_round_{os.getpid()}"
    grow_args = as_of.parse_args([
        "--grow", str(args.grow), "--profiles", str(args.grow_profiles), "--files",
        str(args.grow_files), "--postgres-url", args.postgres_url, "--work-dir", str(work),
        "--gc-paused"])  # each import as `registry import` runs it
    for name in BACKENDS:
        url = as_of._url(name, work, args.grow_profiles, args.postgres_url)
        try:
            _step(record, args.out, name, "grow", lambda name=name, url=url: as_of.grow(
                name, url, grow_folder, grow_layout, grow_args))
        finally:
            if name == "postgresql":
                _drop(args.postgres_url, as_of.PG_DATABASE)


def _drop(admin_url: str, database: str) -> None:
    from sqlalchemy import create_engine, text

    from registry_db.store.urls import normalize_url

    admin = create_engine(normalize_url(admin_url), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{database}"'))
    admin.dispose()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", type=int, default=100_000)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--batch-lines", type=int, default=100_000)
    ap.add_argument("--peak-lines", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cli-repeats", type=int, default=10)
    ap.add_argument("--grow", type=int, default=50, metavar="R")
    ap.add_argument("--grow-profiles", type=int, default=20_000)
    ap.add_argument("--grow-files", type=int, default=40)
    ap.add_argument("--postgres-url", default=default_postgres_url())
    ap.add_argument("--work-dir", type=Path, default=HERE / "work")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "round.json")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {
        "command": "python benchmarks/round.py " + " ".join(
            map(shlex.quote, sys.argv[1:] if argv is None else argv)),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "git": git_revision(HERE.parent), "machine": machine(args.postgres_url),
        "sizes": {k: getattr(args, k) for k in ("profiles", "files", "batch_lines",
                                                 "peak_lines", "repeats", "cli_repeats",
                                                 "grow", "grow_profiles", "grow_files")},
        "uptime_before": _uptime(), "steps": {}}
    print(record["uptime_before"], file=sys.stderr)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=args.work_dir, prefix="round-") as tmp:
        measure_all(args, record, Path(tmp))
    record["duration_s"] = round(time.perf_counter() - started, 1)
    record["uptime_after"] = _uptime()
    _save(record, args.out)
    print(markdown(record))
    print(f"\n{record['uptime_before']}\n{record['uptime_after']}\n"
          f"{record['duration_s']} s; JSON: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
