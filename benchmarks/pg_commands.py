"""Read commands on PostgreSQL against the same command on SQLite, on the same data, and
concurrent PostgreSQL batch clients against one.

Each command runs as a fresh process (``python -m registry_db``), PostgreSQL and SQLite in turn
(``repeats`` pairs, after one warm-up each, which also writes the bytecode cache): the figure is
the median of the pairs' ratios of wall (and CPU: user + system from ``wait4``) time, pairing
keeping a ratio meaningful while the machine's speed drifts. ``--source DIR`` runs another
checkout's code (its folder first on ``PYTHONPATH``), for a before and after on one registry:

    python benchmarks/generate.py /tmp/reg --profiles 100000 --files 200
    registry -d sqlite:////tmp/r.db import /tmp/reg
    registry -d postgresql://postgres@127.0.0.1:5432/bench import /tmp/reg
    git archive BEFORE | tar -x -C /tmp/before
    python benchmarks/pg_commands.py --sqlite sqlite:////tmp/r.db \\
        --postgresql postgresql://postgres@127.0.0.1:5432/bench --source /tmp/before \\
        --label before --out before.json
    python benchmarks/pg_commands.py ... --label after --out after.json

The floor (``floor``) is the driver's import, a connection and one SELECT, in a bare
interpreter, on each backend. ``--other-python PY`` also runs each PostgreSQL command with
another interpreter (a virtual environment with another psycopg install, e.g. ``psycopg[c]``
built against the system's libpq), interleaved with the others, and reports it against this
one's and against SQLite's. ``--clients 8`` also times ``clients`` concurrent
``resolve --batch`` processes on PostgreSQL against one (throughput: lines answered per
second, all clients together).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import generate

HERE = Path(__file__).resolve().parent
VLLM = HERE.parent / "tests" / "data" / "sources" / "vllm" / "drifted.prom"


def _env(source: Path | None) -> dict[str, str]:
    # Installed programs run with their bytecode cached; the warm-up writes it.
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("REGISTRY_")}
    if source is not None:
        env["PYTHONPATH"] = str(source)
    return env


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Wall and CPU seconds of ``cmd`` as a child process, and its exit code."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    return wall, usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status)


def commands(work: Path, layout: generate.Layout) -> dict[str, list[str]]:
    """The read commands, by name, as arguments after ``registry -d URL``."""
    hit = next(generate.hit_requests(layout, 1))
    k3 = next(r for r in generate.hit_requests(layout, 200) if r["k"] == 3)
    batch = work / "batch-1000.jsonl"
    batch.write_text("".join(json.dumps(r) + "\n" for r in generate.requests(layout, 1000)))
    terms = ["--model", hit["model"], "--method", hit["method"], "--k", str(hit["k"]),
             "--thinking", hit["thinking"], "--category", hit["category"]]
    return {
        "resolve --json": ["resolve", *terms, "--json"],
        "resolve (refused)": ["resolve", *terms[:-1], "unseen-category"],
        "resolve --as-of --json": ["resolve", *terms, "--as-of", "2100-01-01", "--json"],
        "resolve --batch (1000 lines)": ["resolve", "--batch", str(batch)],
        "check": ["check", str(VLLM), "--model", k3["model"], "--method", k3["method"],
                  "--k", "3", "--thinking", k3["thinking"], "--category", k3["category"]],
        "show": ["show", layout.set_name(0)],
        "list": ["list"],
        "profiles --model": ["profiles", "--model", hit["model"]],
        "db current": ["db", "current"],
    }


#: The floor of a one-run command: the interpreter, the driver's import, a connection and one
#: SELECT of the schema's revision, no registry code (``{url}``: the URL's connection).
FLOOR = {
    "postgresql": "import psycopg\nfrom registry_db.store.pg_read import connect_kwargs\n"
                  "c = psycopg.connect(**connect_kwargs({url!r}), autocommit=True)\n"
                  "c.execute('SELECT version_num FROM alembic_version').fetchall()",
    "sqlite": "import sqlite3\nc = sqlite3.connect({path!r})\n"
              "c.execute('SELECT version_num FROM alembic_version').fetchall()",
}


def floor_commands(urls: dict[str, str], other: str | None = None) -> dict[str, list[str]]:
    """The :data:`FLOOR` processes, by backend (and ``other``'s, on PostgreSQL)."""
    from registry_db.store.urls import normalize_url, sqlite_path

    pg = normalize_url(urls["postgresql"])
    cmd = {"postgresql": [sys.executable, "-c", FLOOR["postgresql"].format(url=pg)],
           "sqlite": [sys.executable, "-c", FLOOR["sqlite"].format(
               path=sqlite_path(normalize_url(urls["sqlite"])))]}
    if other:
        cmd[OTHER] = [other, *cmd["postgresql"][1:]]
    return cmd


#: The key of ``--other-python``'s PostgreSQL runs.
OTHER = "postgresql_other"


def pair(name: str, args: list[str], urls: dict[str, str], repeats: int,
         env: dict[str, str], cmd: dict[str, list[str]] | None = None,
         other: str | None = None) -> dict[str, Any]:
    """``registry -d URL ARGS`` (or ``cmd``'s processes) on PostgreSQL and SQLite in turn
    (and on PostgreSQL with the interpreter ``other``); medians and paired ratios."""
    if cmd is None:
        cmd = {b: [sys.executable, "-m", "registry_db", "-d", u, *args] for b, u in urls.items()}
        if other:
            cmd[OTHER] = [other, *cmd["postgresql"][1:]]
    for b in cmd:
        run(cmd[b], env)
    runs: dict[str, list[tuple[float, float, int]]] = {b: [] for b in cmd}
    for _ in range(repeats):
        for b in cmd:
            runs[b].append(run(cmd[b], env))
    pg, lite = runs["postgresql"], runs["sqlite"]
    extra: dict[str, Any] = {}
    if OTHER in runs:
        alt = runs[OTHER]
        extra = {"other_python": cmd[OTHER][0],
                 "other_postgresql_wall_s": statistics.median(r[0] for r in alt),
                 "other_postgresql_cpu_s": statistics.median(r[1] for r in alt),
                 "other_ratio_wall": statistics.median(a[0] / s[0] for a, s in zip(alt, lite)),
                 "other_ratio_cpu": statistics.median(a[1] / s[1] for a, s in zip(alt, lite)),
                 "other_vs_this_wall": statistics.median(a[0] / p[0] for a, p in zip(alt, pg)),
                 "other_vs_this_cpu": statistics.median(a[1] / p[1] for a, p in zip(alt, pg))}
    return {
        "command": name, "args": args,
        "exit": {b: sorted({r[2] for r in rs}) for b, rs in runs.items()},
        "postgresql_wall_s": statistics.median(r[0] for r in pg),
        "sqlite_wall_s": statistics.median(r[0] for r in lite),
        "postgresql_cpu_s": statistics.median(r[1] for r in pg),
        "sqlite_cpu_s": statistics.median(r[1] for r in lite),
        "ratio_wall": statistics.median(p[0] / s[0] for p, s in zip(pg, lite)),
        "ratio_cpu": statistics.median(p[1] / s[1] for p, s in zip(pg, lite)),
        **extra,
        "runs": {b: [list(r[:2]) for r in rs] for b, rs in runs.items()},
    }


def _report(row: dict[str, Any]) -> None:
    print(f"{row['command']:30} pg {row['postgresql_wall_s']:.3f} s  sqlite "
          f"{row['sqlite_wall_s']:.3f} s  ratio wall {row['ratio_wall']:.2f}  "
          f"cpu {row['ratio_cpu']:.2f}", file=sys.stderr)
    if "other_python" in row:
        print(f"{'  (--other-python)':30} pg {row['other_postgresql_wall_s']:.3f} s  "
              f"ratio wall {row['other_ratio_wall']:.2f}  cpu {row['other_ratio_cpu']:.2f}  "
              f"against this one's: wall {row['other_vs_this_wall']:.2f}  "
              f"cpu {row['other_vs_this_cpu']:.2f}", file=sys.stderr)


def concurrent(url: str, batch: Path, clients: int, repeats: int,
               env: dict[str, str]) -> dict[str, Any]:
    """Lines per second of ``clients`` concurrent batches against one batch alone."""
    lines = sum(1 for _ in batch.open())
    cmd = [sys.executable, "-m", "registry_db", "-d", url, "resolve", "--batch", str(batch)]
    run(cmd, env)
    one, many = [], []
    for _ in range(repeats):
        one.append(run(cmd, env)[0])
        start = time.perf_counter()
        procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  env=env) for _ in range(clients)]
        codes = [p.wait() for p in procs]
        many.append(time.perf_counter() - start)
        assert set(codes) <= {0, 1}, codes
    alone, together = statistics.median(one), statistics.median(many)
    return {"clients": clients, "lines_per_client": lines, "one_wall_s": alone,
            "clients_wall_s": together, "one_lines_per_s": lines / alone,
            "clients_lines_per_s": clients * lines / together,
            "throughput_ratio": clients * lines / together / (lines / alone),
            "runs": {"one": one, "clients": many}}


def psycopg_install(python: str, env: dict[str, str]) -> str:
    """Which psycopg implementation ``python`` imports, and the libpq it runs on."""
    code = ("import psycopg; print(psycopg.__version__, psycopg.pq.__impl__, 'libpq',"
            " psycopg.pq.version())")
    done = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else "psycopg not importable"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sqlite", required=True, help="the SQLite registry's URL")
    ap.add_argument("--postgresql", required=True, help="the same registry on PostgreSQL")
    ap.add_argument("--profiles", type=int, default=100_000)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--source", type=Path, help="another checkout's folder to run instead")
    ap.add_argument("--other-python", help="another interpreter (another psycopg install) "
                    "to run the PostgreSQL commands with too")
    ap.add_argument("--label", default="")
    ap.add_argument("--only", help="comma-separated command names")
    ap.add_argument("--clients", type=int, default=0)
    ap.add_argument("--batch-lines", type=int, default=20_000)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    env = _env(args.source)
    if args.source is not None:
        # `python -m` puts the working folder before PYTHONPATH: a checkout's own would win.
        args.out = args.out.resolve() if args.out else None
        os.chdir(args.source)
    layout = generate.default_layout(args.profiles, args.files)
    urls = {"postgresql": args.postgresql, "sqlite": args.sqlite}
    result: dict[str, Any] = {
        "label": args.label, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load "
                   f"{os.getloadavg()[0]:.1f} at the start",
        "source": str(args.source or HERE.parent), "repeats": args.repeats,
        "psycopg": {p: psycopg_install(p, env) for p in (sys.executable, args.other_python) if p},
        "commands": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        wanted = set(args.only.split(",")) if args.only else None
        for name, cmd_args in commands(work, layout).items():
            if wanted is None or name in wanted:
                row = pair(name, cmd_args, urls, args.repeats, env, other=args.other_python)
                _report(row)
                result["commands"].append(row)
        if wanted is None or "floor" in wanted:
            row = pair("floor", [], urls, args.repeats, env,
                       floor_commands(urls, args.other_python))
            _report(row)
            result["commands"].append(row)
        if args.clients:
            batch = work / "batch-clients.jsonl"
            batch.write_text("".join(json.dumps(r) + "\n"
                                     for r in generate.requests(layout, args.batch_lines)))
            row = concurrent(args.postgresql, batch, args.clients, max(1, args.repeats // 3),
                             env)
            print(f"{args.clients} clients: {row['throughput_ratio']:.2f}x one client's "
                  f"throughput", file=sys.stderr)
            result["concurrent"] = row
    result["load_end"] = round(os.getloadavg()[0], 2)
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
