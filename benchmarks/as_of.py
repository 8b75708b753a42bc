"""Resolving as of a time against resolving now: one resolution's latency, both ways, same data.

A registry of N current profiles (the generator's, ``run.py``'s layout) is imported twice, the
second time with every set changed (a caveat added), so that every set has two revisions and the
history holds about 2 N profiles. Then, for the same hit requests, one ``resolve()`` call is
timed four ways, alternating request by request so that a busy neighbour slows all alike:

- ``current``: the registry as it stands (``profiles``, the statement every run used before);
- ``as_of_latest``: ``as_of`` now, which the second revisions answer;
- ``as_of_first``: ``as_of`` between the two imports, which the first revisions answer;

through the engine (``resolve(engine, request)``) and, on SQLite, through the read-only
``sqlite3`` connection that ``registry resolve`` uses for one run (its fast path). Medians of
every request × round. The registry is kept in ``--work-dir`` (SQLite file; PostgreSQL database
``registry_bench_as_of``) so that another checkout's code can be timed on the very same data:
``PYTHONPATH=/path/to/old/checkout python benchmarks/as_of.py --reuse`` times ``current`` only
when that code has no ``as_of``.

    python benchmarks/as_of.py                       # 100,000 profiles, SQLite and PostgreSQL
    python benchmarks/as_of.py --profiles 10000 --backends sqlite

``--grow R`` measures a history instead (issue 30): the registry imported R times, each round
after the first changing ``--changed`` (5%) of every set's profiles, with per round the
database's growth (SQLite: the file after a checkpoint; PostgreSQL: ``pg_database_size`` after
``VACUUM``), the bytes this process wrote (``wchar`` of ``/proc/self/io``: SQLite's writes; on
PostgreSQL the server writes) and its CPU time; and at depths 2 and R, one resolution and a
batch (hits, and misses that must say what was stored), now and as of the time between the
first two rounds, median of alternating runs. The second and the last round are imported again
into ``AGAIN`` copies of the registry as it was before them (a file copy; ``CREATE DATABASE ...
TEMPLATE``), so that the CPU ratios divide by the median of five second rounds, not by one.
Only the library's public calls are used, so ``PYTHONPATH=/path/to/old/checkout`` times another
commit on the same data:

    python benchmarks/as_of.py --grow 50 --profiles 20000 --files 40 --backends sqlite
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import shlex
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import generate  # noqa: E402
import measure  # noqa: E402
from backends import _checkpoint, _with_database, default_postgres_url, git_revision, machine  # noqa: E402,E501

HERE = Path(__file__).resolve().parent
PG_DATABASE = "registry_bench_as_of"
#: How many copies the second and last rounds are imported into again (``--grow``).
AGAIN = 4


def _url(backend: str, work: Path, profiles: int, postgres_url: str) -> str:
    if backend == "sqlite":
        return f"sqlite:///{work / f'as_of-{profiles}.db'}"
    return _with_database(postgres_url, PG_DATABASE)


def _sqlite_path(url: str) -> Path:
    return Path(url.split(":///", 1)[1])


def _remove_sqlite(url: str) -> None:
    """The SQLite registry at ``url`` deleted, its WAL and shared memory with it."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{_sqlite_path(url)}{suffix}").unlink(missing_ok=True)


def _pg_admin(postgres_url: str, statements: list[str]) -> None:
    """``statements`` (``CREATE DATABASE`` and the like) run outside a transaction."""
    from sqlalchemy import create_engine, text

    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        for statement in statements:
            conn.execute(text(statement))
    admin.dispose()


def _fresh(backend: str, url: str, postgres_url: str) -> None:
    """An empty registry at ``url`` (the SQLite file or the PostgreSQL database recreated)."""
    from registry_db import store

    if backend == "sqlite":
        _remove_sqlite(url)
    else:
        _pg_admin(postgres_url, [f'DROP DATABASE IF EXISTS "{PG_DATABASE}"',
                                 f'CREATE DATABASE "{PG_DATABASE}"'])
    store.open_registry(url).dispose()


def build(backend: str, url: str, folder: Path, postgres_url: str) -> dict[str, Any]:
    """Import ``folder``, then every set again with one change: two revisions per set. The
    time between the imports (the first revisions' registry) and the counts."""
    from sqlalchemy import text

    from registry_db import store
    from registry_db.importing.write import import_sets
    from registry_db.sources.profile_set import read

    _fresh(backend, url, postgres_url)
    sets, _ = read([folder])
    engine = store.open_registry(url)
    try:
        start = time.perf_counter()
        import_sets(engine, sets)
        between = datetime.now(UTC)
        time.sleep(0.01)
        import_sets(engine, [dataclasses.replace(s, caveats=(*s.caveats, "second revision"))
                             for s in sets])
        took = time.perf_counter() - start
        with engine.connect() as conn:
            from sqlalchemy import inspect

            # The history's profiles: versions (0007 on) or a copy per revision (before).
            held = {"profile_versions", "revision_profiles"} & set(
                inspect(conn).get_table_names())
            counts = {t: conn.execute(text(f"SELECT COUNT(*) FROM {t}")).scalar()
                      for t in ("profiles", "revisions", *sorted(held))}
    finally:
        engine.dispose()
    _settle(backend, url)
    return {"between": between.isoformat(), "import_both_s": took, "rows": counts}


def _settle(backend: str, url: str) -> None:
    if backend == "sqlite":
        _checkpoint(_sqlite_path(url))
        return
    from sqlalchemy import create_engine, text

    eng = create_engine(url, isolation_level="AUTOCOMMIT")
    with eng.connect() as conn:
        conn.execute(text("VACUUM ANALYZE"))
    eng.dispose()


def _has_as_of() -> bool:
    from registry_db.inputs.request import Request

    return "as_of" in {f.name for f in dataclasses.fields(Request)}


def _time(ways: dict[str, tuple[Callable, Any, list]], rounds: int) -> dict[str, list[float]]:
    """Each way's per-call latencies: ``(call, bind, requests)``; the ways alternate per
    request, their order rotating, so that none always runs first."""
    from registry_db.errors import ResolutionRefused

    names = list(ways)
    out: dict[str, list[float]] = {n: [] for n in names}
    count = len(next(iter(ways.values()))[2])
    for name in names:  # warm: statements prepared, pages cached
        call, bind, reqs = ways[name]
        for req in reqs[:20]:
            try:
                call(bind, req)
            except ResolutionRefused:
                pass
    for r in range(rounds):
        for i in range(count):
            shift = (i + r) % len(names)
            for name in names[shift:] + names[:shift]:
                call, bind, reqs = ways[name]
                start = time.perf_counter()
                try:
                    call(bind, reqs[i])
                except ResolutionRefused:
                    pass
                out[name].append(time.perf_counter() - start)
    return out


def measure_latency(backend: str, url: str, lines: list[dict], between: str | None,
                    rounds: int) -> dict[str, Any]:
    """Median µs per way (see the module's docstring), and the as-of ways' ratios to current."""
    from registry_db import store
    from registry_db.resolve.plan import resolve
    from registry_db.store import sqlite_read

    base = measure.library_requests(lines)
    ways: dict[str, tuple[Callable, Any, list]] = {}
    engine = store.open_registry(url, readonly=True)
    conn = sqlite_read.open_readonly(url) if backend == "sqlite" else None
    try:
        variants: dict[str, list] = {"current": base}
        if _has_as_of():
            now = datetime.now(UTC)
            variants["as_of_latest"] = [dataclasses.replace(r, as_of=now) for r in base]
            if between is not None:
                variants["as_of_first"] = [dataclasses.replace(r, as_of=between) for r in base]
        for name, reqs in variants.items():
            ways[f"engine/{name}"] = (resolve, engine, reqs)
            if conn is not None:
                ways[f"sqlite3/{name}"] = (resolve, conn, reqs)
        runs = _time(ways, rounds)
        # Same answers both ways (the latest revisions hold what the current registry does).
        if "engine/as_of_latest" in ways:
            _same(resolve, engine, base, variants["as_of_latest"])
    finally:
        engine.dispose()
        if conn is not None:
            conn.close()
    out: dict[str, Any] = {"samples": len(base) * rounds, "median_us": {}, "ratio": {}}
    for name, values in runs.items():
        out["median_us"][name] = round(statistics.median(values) * 1e6, 1)
    for name, value in out["median_us"].items():
        path, way = name.split("/")
        if way != "current":
            out["ratio"][name] = round(value / out["median_us"][f"{path}/current"], 3)
    return out


def _same(resolve: Callable, engine: Any, now: list, then: list) -> None:
    for a, b in zip(now, then):
        x, y = resolve(engine, a).to_json(), resolve(engine, b).to_json()
        if x != y:
            raise AssertionError(f"as of now differs from now: {x} != {y}")


def _changed(sets: list, fraction: float, round_: int) -> list:
    """Every set with ``fraction`` of its profiles' AL moved a little (still in [1, K + 1]),
    chosen afresh each round."""
    import random

    out = []
    for s in sets:
        rng = random.Random(f"grow/{s.name}/{round_}")
        n = max(1, round(len(s.profiles) * fraction))
        picked = set(rng.sample(range(len(s.profiles)), n))
        out.append(dataclasses.replace(s, profiles=tuple(
            dataclasses.replace(p, acceptance_length=_nudged(float(p.acceptance_length),
                                                             p.num_spec_tokens, round_))
            if i in picked else p for i, p in enumerate(s.profiles))))
    return out


def _nudged(al: float, k: int, round_: int) -> float:
    step = 0.001 * (1 + round_ % 7)
    return al - step if al + step > k + 1 else al + step


def _size(backend: str, url: str) -> int:
    """The registry's bytes on disk, settled (checkpointed; vacuumed on PostgreSQL)."""
    _settle(backend, url)
    if backend == "sqlite":
        path = _sqlite_path(url)
        return sum(Path(f"{path}{x}").stat().st_size for x in ("", "-wal")
                   if Path(f"{path}{x}").exists())
    from sqlalchemy import create_engine, text

    eng = create_engine(url)
    with eng.connect() as conn:
        size = int(conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one())
    eng.dispose()
    return size


def _written() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    return 0


#: Alternating runs of each 1,000-line batch: one run is a few ms, and three medians moved the
#: ratio between runs of one tree (docs/decisions.md, "An import's rounds").
BATCH_REPEATS = 15


def _median_of(calls: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Seconds per call, median of ``repeats`` alternating runs (order rotating)."""
    names = list(calls)
    runs: dict[str, list[float]] = {n: [] for n in names}
    for name in names:
        calls[name]()  # warm
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start = time.perf_counter()
            calls[name]()
            runs[name].append(time.perf_counter() - start)
    return {n: statistics.median(v) for n, v in runs.items()}


def measure_depth(backend: str, url: str, layout: Any, between: datetime, requests: int,
                  batch: int, rounds: int) -> dict[str, Any]:
    """One resolution (engine, and the read-only sqlite3 path) and a batch, now and as of
    ``between``: hits, and misses (a K no set holds) that say what was stored."""
    from registry_db import store
    from registry_db.resolve.plan import resolve_many

    lines = list(generate.hit_requests(layout, max(requests, batch)))
    single = measure_latency(backend, url, lines[:requests], between.isoformat(), rounds)
    hits = measure.library_requests(lines[:batch])
    misses = [dataclasses.replace(r, k=generate.MAX_K + 1) for r in hits]
    then = {name: [dataclasses.replace(r, as_of=between) for r in reqs]
            for name, reqs in (("hits", hits), ("misses", misses))}
    engine = store.open_registry(url, readonly=True)
    try:
        calls: dict[str, Callable[[], Any]] = {}
        for name, reqs in (("hits", hits), ("misses", misses)):
            calls[f"{name}/current"] = functools.partial(resolve_many, engine, reqs)
            calls[f"{name}/as_of_first"] = functools.partial(resolve_many, engine, then[name])
        took = _median_of(calls, BATCH_REPEATS)
        refused = sum(1 for a in resolve_many(engine, then["misses"][:50])
                      if "stored for" in getattr(a, "message", ""))
    finally:
        engine.dispose()
    out = {"single": single, "batch_lines": batch, "batch_s": {k: round(v, 4)
                                                                for k, v in took.items()},
           "batch_ratio": {n: round(took[f"{n}/as_of_first"] / took[f"{n}/current"], 3)
                           for n in ("hits", "misses")},
           "misses_saying_what_was_stored_of_50": refused}
    return out


def _copies(backend: str, url: str, postgres_url: str, n: int) -> list[str]:
    """``n`` copies of the registry at ``url`` (closed: no connection may be open), as URLs."""
    if backend == "sqlite":
        path = _sqlite_path(url)
        out = []
        for i in range(n):
            copy = path.with_name(f"{path.stem}-again-{i}{path.suffix}")
            for suffix in ("", "-wal"):
                if Path(f"{path}{suffix}").exists():
                    shutil.copyfile(f"{path}{suffix}", f"{copy}{suffix}")
            out.append(f"sqlite:///{copy}")
        return out
    names = [f"{PG_DATABASE}_again_{i}" for i in range(n)]
    _pg_admin(postgres_url, [s for name in names for s in (
        f'DROP DATABASE IF EXISTS "{name}"', f'CREATE DATABASE "{name}" TEMPLATE "{PG_DATABASE}"')])
    return [_with_database(postgres_url, name) for name in names]


def _drop_copies(backend: str, urls: list[str], postgres_url: str) -> None:
    if backend == "sqlite":
        for url in urls:
            _remove_sqlite(url)
        return
    from sqlalchemy.engine import make_url

    _pg_admin(postgres_url,
              [f'DROP DATABASE IF EXISTS "{make_url(url).database}"' for url in urls])


def _import_cpu(url: str, content: Any, paused: Any) -> float:
    """The CPU seconds of importing ``content`` into the registry at ``url``, as a round."""
    from registry_db import store
    from registry_db.importing.write import import_sets

    engine = store.open_registry(url)
    try:
        cpu = time.process_time()
        with paused():
            import_sets(engine, content)
        return round(time.process_time() - cpu, 3)
    finally:
        engine.dispose()


def grow(backend: str, url: str, folder: Path, layout: Any, args: argparse.Namespace
         ) -> dict[str, Any]:
    """The history benchmark (``--grow``): see the module's docstring."""
    import contextlib

    from registry_db import store
    from registry_db.importing.write import import_sets
    from registry_db.sources.profile_set import read

    # --gc-paused: each import as `registry import` runs it; else the collector sees this
    # process's own heap (the library leaves it on).
    paused: Any = contextlib.nullcontext
    if args.gc_paused:
        from registry_db.gcpause import gc_paused as paused
    _fresh(backend, url, args.postgres_url)
    sets, _ = read([folder])
    sets = list(sets)
    empty = _size(backend, url)
    per_round: list[dict[str, Any]] = []
    depths: dict[str, Any] = {}
    between = None
    engine = store.open_registry(url)
    content = sets
    try:
        for r in range(1, args.grow + 1):
            # Each round changes the share of what the last one imported: changes accumulate.
            content = content if r == 1 else _changed(content, args.changed, r)
            copies: list[str] = []
            if r in (2, args.grow):
                engine.dispose()
                copies = _copies(backend, url, args.postgres_url, AGAIN)
            before, cpu, wall = _written(), time.process_time(), time.perf_counter()
            with paused():
                import_sets(engine, content)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            written = _written() - before
            size = _size(backend, url)
            last = per_round[-1]["size"] if per_round else empty
            per_round.append({"round": r, "cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
                              "written": written, "size": size, "growth": size - last})
            if copies:
                per_round[-1]["again_cpu_s"] = [_import_cpu(u, content, paused) for u in copies]
                _drop_copies(backend, copies, args.postgres_url)
            print(f"  round {r}: {wall:.2f} s, {cpu:.2f} s CPU, wrote {written / 2**20:.1f} "
                  f"MiB, grew {(size - last) / 2**20:.2f} MiB", file=sys.stderr)
            if r == 1:
                time.sleep(0.01)
                between = datetime.now(UTC)
                time.sleep(0.01)
            if r in (2, args.grow):
                assert between is not None
                engine.dispose()
                depths[str(r)] = measure_depth(backend, url, layout, between, args.requests,
                                               args.batch, args.rounds)
                print(f"  depth {r}: " + json.dumps({"single": depths[str(r)]["single"]["ratio"],
                                                     "batch": depths[str(r)]["batch_ratio"]}),
                      file=sys.stderr)
    finally:
        engine.dispose()
    first = per_round[0]["size"] - empty
    second = per_round[1]
    later = per_round[1:]

    def cpu_of(x: dict[str, Any]) -> float:  # a round's CPU, the median with its repeats
        return statistics.median([x["cpu_s"], *x.get("again_cpu_s", ())])

    def ratio(a: float, b: float) -> float | None:  # PostgreSQL's writes are the server's
        return round(a / b, 3) if b else None

    return {
        "rounds": per_round, "depths": depths, "first_import_bytes": first,
        "growth_per_revision_vs_first": round(statistics.median(
            x["growth"] for x in later) / first, 4),
        "last_round_vs_second": {
            "written": ratio(per_round[-1]["written"], second["written"]),
            "cpu": ratio(cpu_of(per_round[-1]), cpu_of(second))},
        # The last five rounds' medians: one busy neighbour does not make a round's figure.
        "last_five_median_vs_second": {
            "written": ratio(statistics.median(x["written"] for x in per_round[-5:]),
                             second["written"]),
            "cpu": ratio(statistics.median(x["cpu_s"] for x in per_round[-5:]),
                         cpu_of(second))},
        "worst_round_vs_second": {
            "written": ratio(max(x["written"] for x in later), second["written"]),
            "cpu": ratio(max(x["cpu_s"] for x in later), cpu_of(second))},
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--profiles", type=int, default=100_000)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--postgres-url", default=default_postgres_url())
    ap.add_argument("--work-dir", type=Path, default=HERE / "work")
    ap.add_argument("--reuse", action="store_true",
                    help="Time the registry left by an earlier run instead of building it.")
    ap.add_argument("--json-out", type=Path, default=HERE / "results" / "as_of.json")
    ap.add_argument("--grow", type=int, default=0, metavar="R",
                    help="Measure a history of R imports instead (see the module's docstring).")
    ap.add_argument("--changed", type=float, default=0.05,
                    help="With --grow: the share of each set's profiles changed per round.")
    ap.add_argument("--batch", type=int, default=1000, help="With --grow: lines per batch.")
    ap.add_argument("--gc-paused", action="store_true",
                    help="With --grow: each import with the collector paused, as the command.")
    ap.add_argument("--pg-database", default=PG_DATABASE,
                    help="The PostgreSQL database this run recreates.")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Build (or reuse) the registry per backend, time the ways, print and write JSON."""
    global PG_DATABASE
    args = parse_args(argv)
    PG_DATABASE = args.pg_database
    args.work_dir.mkdir(parents=True, exist_ok=True)
    layout, folder = generate.registry_folder(args.work_dir, args.profiles, args.files)
    lines = list(generate.hit_requests(layout, args.requests))
    results = []
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        url = _url(backend, args.work_dir, args.profiles, args.postgres_url)
        if args.grow:
            results.append({"backend": backend, "profiles": args.profiles, "files": args.files,
                            "changed": args.changed,
                            **grow(backend, url, folder, layout, args)})
            continue
        state = args.work_dir / f"as_of-{backend}-{args.profiles}.json"
        if args.reuse and state.exists():
            built = json.loads(state.read_text())
        else:
            built = build(backend, url, folder, args.postgres_url)
            state.write_text(json.dumps(built) + "\n")
        lat = measure_latency(backend, url, lines, built["between"], args.rounds)
        results.append({"backend": backend, "profiles": args.profiles, **built, **lat})
        print(f"{backend}: " + ", ".join(f"{k} {v} µs" for k, v in lat["median_us"].items())
              + "; ratios " + json.dumps(lat["ratio"]), file=sys.stderr)
    record = {
        "command": "python benchmarks/as_of.py " + " ".join(
            map(shlex.quote, sys.argv[1:] if argv is None else argv)),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "git": git_revision(HERE.parent), "has_as_of": _has_as_of(),
        "machine": machine(args.postgres_url if "postgresql" in args.backends else None),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "results": results,
    }
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({r["backend"]: {k: r[k] for k in (
        "growth_per_revision_vs_first", "last_round_vs_second", "last_five_median_vs_second",
        "worst_round_vs_second")}
        if args.grow else {"median_us": r["median_us"], "ratio": r["ratio"]}
        for r in results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
