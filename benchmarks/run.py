"""The benchmark harness: named scenarios, each ours against a raw baseline in the same run.

Scenarios (``SCENARIOS``; all of the first four when none is named):

- ``import``: a fresh ``registry import`` against its floor (libyaml's events + the driver's bulk
  write into every table), in process too, and the unchanged re-import against the fresh one;
- ``batch``: ``registry resolve --batch`` against the set-based join, answers compared;
- ``commands``: one ``registry resolve --json`` against ``python -c "import sqlite3"``;
- ``scaling``: one resolution's latency at growing registries, and its growth;
- ``history``: an import's rounds as the history grows (``as_of.py --grow``);
- ``as-of``: one resolution and a batch as of a time against now (``as_of.py``);
- ``postgresql``: each read command on PostgreSQL against SQLite (``pg_commands.py``).

Every figure is the median of several runs, ours and the baseline alternating. The table goes
to stdout, everything (runs, machine, command) to ``--json-out``; ``--publish`` also writes each
scenario's current result to ``published/SCENARIO.json`` (one file a scenario; git keeps the
old ones). Sizes: ``full`` (100,000 profiles in 200 files, scaling to 1M), ``quick`` (10,000 in
20), ``tiny`` (a smoke test in seconds).

    python benchmarks/run.py --quick
    python benchmarks/run.py import batch --backends sqlite --publish
    python benchmarks/run.py history as-of --sizes quick
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import as_of  # noqa: E402
import generate  # noqa: E402
import measure  # noqa: E402
import pg_commands  # noqa: E402
from backends import Backend, default_postgres_url, git_revision, machine  # noqa: E402

HERE = Path(__file__).resolve().parent

SIZES: dict[str, dict[str, Any]] = {
    "tiny": dict(profiles=400, files=4, requests=400, scaling=(200, 400), repeats=1,
                 cli_repeats=2, latency_requests=20, grow=3, grow_profiles=400, grow_files=4),
    "quick": dict(profiles=10_000, files=20, requests=10_000, scaling=(1_000, 10_000),
                  repeats=3, cli_repeats=5, latency_requests=100, grow=10,
                  grow_profiles=10_000, grow_files=20),
    "full": dict(profiles=100_000, files=200, requests=100_000,
                 scaling=(1_000, 10_000, 100_000, 1_000_000), repeats=3, cli_repeats=10,
                 latency_requests=200, grow=50, grow_profiles=20_000, grow_files=40),
}
#: The scenarios in the order they run; the first four share one imported registry per backend.
SCENARIOS = ("import", "batch", "commands", "scaling", "history", "as-of", "postgresql")
DEFAULT_SCENARIOS = SCENARIOS[:4]
PER_FILE = 500  # scaling registries keep the import benchmark's 500 profiles per set
#: ours ÷ baseline, in time: import ÷ (libyaml's events + executemany into every table an import
#: writes, issue 30), a re-import of the unchanged folder ÷ the fresh import (issue 30), batch ÷
#: the raw set-based join with JSON in and out, one CLI resolution ÷ ``python -c "import
#: sqlite3"`` (issue 14).
TARGETS = {"import": 1.8, "reimport": 0.1, "batch": 1.3, "cli": 4.0, "growth": 1.5}


def run_backend(name: str, cfg: dict, args: argparse.Namespace, db_dir: Path) -> list[dict]:
    """The chosen registry scenarios on one backend; the result rows (each with its
    ``scenario``). SQLite files go under ``db_dir``."""
    print(f"[{name}]", file=sys.stderr)
    work = args.work_dir
    chosen = set(args.scenarios)
    backend = Backend(name, db_dir, args.postgres_url)
    rows: list[dict] = []
    try:
        layout, folder = generate.registry_folder(work, cfg["profiles"], cfg["files"])
        imp, url = measure.bench_import(backend, folder, cfg["repeats"])
        if "import" in chosen:
            rows.append(dict(benchmark="import", backend=name, size=layout.profiles,
                             files=cfg["files"], target=TARGETS["import"], **imp))
            _progress(rows[-1])
        if "batch" in chosen:
            lines = list(generate.requests(layout, cfg["requests"]))
            batch = _attempt("batch", lambda: measure.bench_batch(url, lines, cfg["repeats"],
                                                                  db_dir))
            rows.append(dict(benchmark="batch", backend=name, size=layout.profiles,
                             target=TARGETS["batch"], **batch))
            _progress(rows[-1])
        if "commands" in chosen:
            cli = _attempt("cli", lambda: measure.bench_cli(
                url, next(generate.hit_requests(layout, 1)), cfg["cli_repeats"]))
            rows.append(dict(benchmark="cli", backend=name, size=layout.profiles,
                             target=TARGETS["cli"], **cli))
            _progress(rows[-1])
        if "scaling" not in chosen:
            return rows
        sizes = [s for s in cfg["scaling"] if s <= args.max_profiles]
        loaded = {layout.profiles: (imp, url, layout)}
        for size in sorted(sizes, key=lambda s: s != layout.profiles):
            if size in loaded:
                s_imp, s_url, s_layout = loaded[size]
            else:
                s_layout, s_folder = generate.registry_folder(work, size, max(2, size // PER_FILE))
                reps = cfg["repeats"] if size <= 10_000 else 1
                s_imp, s_url = measure.bench_import(backend, s_folder, reps,
                                                    baseline=size <= args.max_baseline,
                                                    inproc=False)
            def latency(url: str = s_url, layout: generate.Layout = s_layout) -> dict:
                return measure.bench_latency(
                    url, list(generate.hit_requests(layout, cfg["latency_requests"])))
            lat = _attempt("latency", latency)
            rows.append(dict(benchmark="scaling", backend=name, size=size,
                             import_=s_imp, latency=lat))
            _progress(rows[-1])
        rows.sort(key=lambda r: (r["benchmark"] == "scaling", r["size"]))
        rows.extend(_growth(name, rows))
    finally:
        backend.close()
    return rows


def _delegate(main: Callable[[list[str]], int], argv: list[str], tmp: Path) -> dict:
    """Run another scenario module's ``main`` with its JSON written to a file; that JSON."""
    out = tmp / "delegate.json"
    out.unlink(missing_ok=True)
    main([*argv, "--json-out" if main is as_of.main else "--out", str(out)])
    return json.loads(out.read_text())


def run_history(cfg: dict, args: argparse.Namespace, backends: list[str], tmp: Path,
                grow: bool) -> list[dict]:
    """``history`` (``grow``: an import's rounds as the history grows) or ``as-of`` (one
    resolution and a batch as of a time against now), by ``as_of.py``, per backend."""
    argv = ["--backends", ",".join(backends), "--postgres-url", args.postgres_url,
            "--work-dir", str(args.work_dir), "--profiles", str(cfg["grow_profiles"]),
            "--files", str(cfg["grow_files"])]
    argv += ["--grow", str(cfg["grow"]), "--gc-paused"] if grow else []
    record = _attempt("as_of", lambda: _delegate(as_of.main, argv, tmp))
    return [{"benchmark": "history" if grow else "as-of", "size": r["profiles"], **r}
            for r in record.get("results", [])] or [
        dict(benchmark="history" if grow else "as-of", backend=",".join(backends),
             size=cfg["grow_profiles"], **record)]


def run_postgresql(cfg: dict, args: argparse.Namespace, tmp: Path) -> list[dict]:
    """``postgresql``: every read command on PostgreSQL against SQLite on the same files."""
    layout, folder = generate.registry_folder(args.work_dir, cfg["profiles"], cfg["files"])
    backends = {name: Backend(name, tmp, args.postgres_url) for name in ("sqlite", "postgresql")}
    try:
        urls = {name: b.fresh() for name, b in backends.items()}
        for url in urls.values():
            measure.import_ours(url, folder)
        argv = ["--sqlite", urls["sqlite"], "--postgresql", urls["postgresql"],
                "--profiles", str(layout.profiles), "--files", str(cfg["files"]),
                "--repeats", str(cfg["cli_repeats"])]
        record = _attempt("pg_commands", lambda: _delegate(pg_commands.main, argv, tmp))
    finally:
        for b in backends.values():
            b.close()
    return [dict(benchmark="postgresql", backend="postgresql/sqlite", size=layout.profiles,
                 **record)]


#: Which scenario each result row belongs to.
SCENARIO_OF = {"import": "import", "batch": "batch", "cli": "commands", "scaling": "scaling",
               "growth": "scaling", "history": "history", "as-of": "as-of",
               "postgresql": "postgresql"}


def _attempt(what: str, fn: Callable[[], dict]) -> dict:
    """Run one measurement; a failure of the library is recorded in its row, not fatal."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - the other measurements still count
        print(f"  {what} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return {"error": f"{type(exc).__name__}: {exc}"}


def _growth(name: str, rows: list[dict]) -> list[dict]:
    scaling = sorted((r for r in rows if r["benchmark"] == "scaling"
                      and "error" not in r["latency"]), key=lambda r: r["size"])
    if len(scaling) < 2:
        return []
    lo, hi = scaling[0], scaling[-1]
    return [dict(benchmark="growth", backend=name, size=hi["size"], from_size=lo["size"],
                 ours_s=hi["latency"]["ours_s"], baseline_s=lo["latency"]["ours_s"],
                 ratio=hi["latency"]["ours_s"] / lo["latency"]["ours_s"],
                 target=TARGETS["growth"])]


def _progress(row: dict) -> None:
    for line in table_rows(row):
        print("  " + "  ".join(line[:6]), file=sys.stderr)


# --- the table -----------------------------------------------------------------------------------

def _t(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def table_rows(r: dict) -> list[list[str]]:
    """A result's table lines: benchmark, backend, size, ours, baseline, ratio, target, met?"""
    b, name = r["benchmark"], r["backend"]
    failed = r.get("error") or (r.get("latency") or {}).get("error")
    if failed:
        return [[b, name, f"{r['size']:,}", "error", "-", "-", "-", failed[:60]]]
    if b == "import":
        size = f"{r['size']:,} profiles / {r['files']} files"
        floor = " (events + bulk write, all tables)"
        out = [["import, whole process", name, size, _t(r["ours_s"]),
                _t(r["baseline_s"]) + floor, f"{r['ratio']:.2f}",
                f"≤ {r['target']:g}", _yes(r["ratio"] <= r["target"])]]
        if r.get("reimport_s") is not None:
            out.append(["import again, unchanged", name, size, _t(r["reimport_s"]),
                        _t(r["ours_s"]) + " (the fresh import)", f"{r['reimport_ratio']:.2f}",
                        f"≤ {TARGETS['reimport']:g}",
                        _yes(r["reimport_ratio"] <= TARGETS["reimport"])])
        ip = r.get("inproc")
        if ip:
            out.append(["import, in process (CPU)", name, size, _t(ip["ours_cpu_s"]),
                        _t(ip["baseline_cpu_s"]) + floor,
                        f"{ip['ratio_cpu']:.2f}", f"≤ {r['target']:g}",
                        _yes(ip["ratio_cpu"] <= r["target"])])
        if r.get("baseline_rss_mib"):
            out.append(["import, peak RSS", name, size, _mib(r["ours_rss_mib"]),
                        _mib(r["baseline_rss_mib"]),
                        f"{r['ours_rss_mib'] / r['baseline_rss_mib']:.2f}", "-", "-"])
        return out
    if b == "batch":
        size = f"{r['requests']:,} requests / {r['size']:,}"
        return [
            ["batch, whole process", name, size,
             f"{_t(r['ours_s'])} ({r['ours_per_s']:,.0f}/s)",
             f"{_t(r['baseline_s'])} (set-based join, JSON in/out)", f"{r['ratio']:.2f}",
             f"≤ {r['target']:g}", _yes(r["ratio"] <= r["target"])],
            ["batch vs point-query loop", name, size, _t(r["ours_s"]),
             f"{_t(r['loop_s'])} (one SELECT a line, JSON in/out)", f"{r['ratio_loop']:.2f}",
             "-", "-"],
        ] + ([["batch, peak RSS", name, size, _mib(r["ours_rss_mib"]),
                _mib(r["baseline_rss_mib"]) + " (join)",
                f"{r['ours_rss_mib'] / r['baseline_rss_mib']:.2f}", "-", "-"]]
             if r.get("baseline_rss_mib") else [])
    if b == "cli":
        unused = ", ".join(r["imports"]["unused"]) or "none"
        return [["CLI resolve --json", name, f"{r['size']:,}", _t(r["ours_s"]),
                 _t(r["baseline_s"]) + " (python -c 'import sqlite3')", f"{r['ratio']:.2f}",
                 f"≤ {r['target']:g}", _yes(r["ratio"] <= r["target"])
                 + f" (unused imports: {unused})"]]
    if b in ("history", "as-of", "postgresql"):
        return [[b, name, f"{r['size']:,}", "see the JSON", "-", "-", "-", "-"]]
    if b == "scaling":
        imp, lat = r["import_"], r["latency"]
        base = f"{_t(lat['baseline_s'])} / {_t(imp.get('baseline_s'))}"
        ratio = f"{lat['ratio']:.2f} / " + (f"{imp['ratio']:.2f}" if "ratio" in imp else "-")
        return [["scaling: latency / import", name, f"{r['size']:,}",
                 f"{_t(lat['ours_s'])} / {_t(imp['ours_s'])}", base, ratio, "-", "-"]]
    met = _yes(r["ratio"] <= r["target"]) if r["size"] >= 1_000_000 else (
        "not measured at 1M")
    return [["latency growth", name, f"{r['size']:,} vs {r['from_size']:,}", _t(r["ours_s"]),
             _t(r["baseline_s"]) + f" (at {r['from_size']:,})", f"{r['ratio']:.2f}",
             f"≤ {r['target']:g} (1M vs 1k)", met]]


def _mib(value: float) -> str:
    return f"{value:,.0f} MiB"


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"


HEADER = ["benchmark", "backend", "size", "ours (median)", "baseline (median)", "ratio",
          "target", "met?"]


def markdown_table(rows: list[dict]) -> str:
    """The results as a Markdown table (what the README quotes)."""
    out = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    out += ["| " + " | ".join(line) + " |" for r in rows for line in table_rows(r)]
    return "\n".join(out)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                    help=f"any of {', '.join(SCENARIOS)} (default: "
                         f"{', '.join(DEFAULT_SCENARIOS)})")
    ap.add_argument("--quick", action="store_true", help="same as --sizes quick")
    ap.add_argument("--sizes", choices=sorted(SIZES), default=None)
    ap.add_argument("--backends", default="sqlite,postgresql",
                    help="comma-separated: sqlite, postgresql")
    ap.add_argument("--postgres-url", default=default_postgres_url(),
                    help="a server where the user may CREATE DATABASE (a fresh one per run)")
    ap.add_argument("--max-profiles", type=int, default=1_000_000,
                    help="skip scaling points above this many profiles")
    ap.add_argument("--max-baseline", type=int, default=100_000,
                    help="no raw import baseline at scaling points above this")
    ap.add_argument("--repeats", type=int, default=None, help="override the size's repeats")
    ap.add_argument("--work-dir", type=Path, default=HERE / "work",
                    help="generated registries and SQLite files (kept between runs)")
    ap.add_argument("--json-out", type=Path, default=HERE / "results" / "latest.json")
    ap.add_argument("--publish", action="store_true",
                    help="also write each scenario's result to published/SCENARIO.json")
    args = ap.parse_args(argv)
    unknown = sorted(set(args.scenarios) - set(SCENARIOS))
    if unknown:
        ap.error(f"unknown scenario {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
    args.scenarios = [s for s in SCENARIOS if s in (args.scenarios or DEFAULT_SCENARIOS)]
    args.sizes = args.sizes or ("quick" if args.quick else "full")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run, print the table, write the JSON."""
    args = parse_args(argv)
    cfg = dict(SIZES[args.sizes])
    if args.repeats:
        cfg["repeats"] = args.repeats
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    args.work_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(dir=args.work_dir, prefix="run-") as tmp:
        if set(args.scenarios) & set(DEFAULT_SCENARIOS):
            for name in backends:
                rows += run_backend(name, cfg, args, Path(tmp))
        for scenario in ("history", "as-of"):
            if scenario in args.scenarios:
                rows += run_history(cfg, args, backends, Path(tmp), grow=scenario == "history")
        if "postgresql" in args.scenarios:
            rows += run_postgresql(cfg, args, Path(tmp))
    record = {
        "command": "python benchmarks/run.py " + " ".join(map(shlex.quote, sys.argv[1:]
                                                            if argv is None else argv)),
        "sizes": args.sizes, "config": cfg,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.perf_counter() - started, 1),
        "git": git_revision(HERE.parent),
        "machine": machine(args.postgres_url if "postgresql" in backends else None),
        "results": rows,
    }
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    if args.publish:
        publish(record, args.scenarios)
    print(markdown_table(rows))
    m = record["machine"]
    print(f"\nmachine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, SQLite "
          f"{m['sqlite']}, PostgreSQL {m['postgresql']}; {record['duration_s']} s; "
          f"JSON: {args.json_out}")
    return 0


def publish(record: dict, scenarios: list[str]) -> None:
    """Each scenario's rows, with the run's facts, as its one current file under published/."""
    folder = HERE / "published"
    folder.mkdir(exist_ok=True)
    words = shlex.split(record["command"])
    local = {"--work-dir", "--json-out"}  # this machine's folders: not part of what was measured
    command = " ".join(shlex.quote(w) for i, w in enumerate(words)
                       if w.split("=", 1)[0] not in local and (i == 0 or words[i - 1] not in local))
    for scenario in scenarios:
        rows = [r for r in record["results"] if SCENARIO_OF[r["benchmark"]] == scenario]
        one = {k: v for k, v in record.items() if k != "results"} | {
            "command": command, "scenario": scenario, "results": rows}
        (folder / f"{scenario}.json").write_text(json.dumps(one, indent=2) + "\n",
                                                 encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
