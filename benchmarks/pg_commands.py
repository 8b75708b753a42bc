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
interpreter, on each backend. ``--other-python PY`` (a virtual environment with another
psycopg install, e.g. ``psycopg[c]`` built against the system's libpq) and ``--other-source
DIR`` (a before, for a paired before and after) run every command that way too, on both
backends, interleaved with the rest: the ratios other / this are paired. ``--clients 8``
also times ``clients`` concurrent ``resolve --batch`` processes on PostgreSQL against one
(throughput: lines answered per second, all clients together).
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
from typing import Any, NamedTuple

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


class Variant(NamedTuple):
    """The interpreter and the checkout (``None``: the installed one) a command runs with."""

    python: str
    source: Path | None = None

    @property
    def env(self) -> dict[str, str]:
        return _env(self.source)

    @property
    def cwd(self) -> str | None:
        # `python -m` puts the working folder before PYTHONPATH: a checkout's own would win.
        return str(self.source) if self.source is not None else None


def run(cmd: list[str], env: dict[str, str],
        cwd: str | None = None) -> tuple[float, float, int]:
    """Wall and CPU seconds of ``cmd`` as a child process, and its exit code."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
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


def floor_commands(urls: dict[str, str], python: str = sys.executable) -> dict[str, list[str]]:
    """The :data:`FLOOR` processes, by backend."""
    from registry_db.store.urls import normalize_url, sqlite_path

    pg = normalize_url(urls["postgresql"])
    return {"postgresql": [python, "-c", FLOOR["postgresql"].format(url=pg)],
            "sqlite": [python, "-c", FLOOR["sqlite"].format(
                path=sqlite_path(normalize_url(urls["sqlite"])))]}


def registry_commands(args: list[str], urls: dict[str, str],
                      python: str = sys.executable) -> dict[str, list[str]]:
    """``registry -d URL ARGS`` as processes, by backend."""
    return {b: [python, "-m", "registry_db", "-d", u, *args] for b, u in urls.items()}


def _ratio(a: list[tuple[float, float, int]], b: list[tuple[float, float, int]],
           i: int) -> float:
    return statistics.median(x[i] / y[i] for x, y in zip(a, b))


def pair(name: str, args: list[str], urls: dict[str, str], repeats: int,
         env: dict[str, str], cmd: dict[str, list[str]] | None = None, *,
         this: Variant | None = None, other: Variant | None = None,
         floor: bool = False) -> dict[str, Any]:
    """``registry -d URL ARGS`` (or ``cmd``'s processes, or with ``floor`` the floor's) on
    PostgreSQL and SQLite in turn, and with ``other`` (another interpreter or checkout) on
    both too, interleaved; medians and paired ratios."""
    here = this or Variant(sys.executable)
    slots: dict[str, tuple[list[str], dict[str, str], str | None]] = {}
    for prefix, v, v_env in (("", here, env), ("other_", other, None)):
        if v is None:
            continue
        if floor:
            procs = floor_commands(urls, v.python)
        elif cmd is not None and not prefix:
            procs = cmd
        else:
            procs = registry_commands(args, urls, v.python)
        for b, c in procs.items():
            slots[prefix + b] = (c, v_env if v_env is not None else v.env, v.cwd)
    for c, e, d in slots.values():
        run(c, e, d)
    runs: dict[str, list[tuple[float, float, int]]] = {k: [] for k in slots}
    for _ in range(repeats):
        for k, (c, e, d) in slots.items():
            runs[k].append(run(c, e, d))
    pg, lite = runs["postgresql"], runs["sqlite"]
    extra: dict[str, Any] = {}
    if other is not None:
        opg, olite = runs["other_postgresql"], runs["other_sqlite"]
        extra = {"other": {"python": other.python, "source": str(other.source or "")},
                 **_medians(opg, olite, "other_"),
                 "other_vs_this_postgresql_wall": _ratio(opg, pg, 0),
                 "other_vs_this_postgresql_cpu": _ratio(opg, pg, 1),
                 "other_vs_this_sqlite_wall": _ratio(olite, lite, 0),
                 "other_vs_this_sqlite_cpu": _ratio(olite, lite, 1)}
    return {
        "command": name, "args": args,
        "exit": {b: sorted({r[2] for r in rs}) for b, rs in runs.items()},
        **_medians(pg, lite, ""),
        **extra,
        "runs": {b: [list(r[:2]) for r in rs] for b, rs in runs.items()},
    }


def _medians(pg: list, lite: list, prefix: str) -> dict[str, float]:
    """Each backend's median wall and CPU time, and their paired ratios, named with ``prefix``."""
    return {f"{prefix}postgresql_wall_s": statistics.median(r[0] for r in pg),
            f"{prefix}sqlite_wall_s": statistics.median(r[0] for r in lite),
            f"{prefix}postgresql_cpu_s": statistics.median(r[1] for r in pg),
            f"{prefix}sqlite_cpu_s": statistics.median(r[1] for r in lite),
            f"{prefix}ratio_wall": _ratio(pg, lite, 0),
            f"{prefix}ratio_cpu": _ratio(pg, lite, 1)}


def _report(row: dict[str, Any]) -> None:
    print(f"{row['command']:30} pg {row['postgresql_wall_s']:.3f} s  sqlite "
          f"{row['sqlite_wall_s']:.3f} s  ratio wall {row['ratio_wall']:.2f}  "
          f"cpu {row['ratio_cpu']:.2f}", file=sys.stderr)
    if "other" in row:
        print(f"{'  other':30} pg {row['other_postgresql_wall_s']:.3f} s  sqlite "
              f"{row['other_sqlite_wall_s']:.3f} s  ratio wall {row['other_ratio_wall']:.2f}  "
              f"cpu {row['other_ratio_cpu']:.2f}", file=sys.stderr)
        print(f"{'  other / this':30} pg wall {row['other_vs_this_postgresql_wall']:.2f} "
              f"cpu {row['other_vs_this_postgresql_cpu']:.2f}  sqlite wall "
              f"{row['other_vs_this_sqlite_wall']:.2f} "
              f"cpu {row['other_vs_this_sqlite_cpu']:.2f}", file=sys.stderr)


def concurrent(url: str, batch: Path, clients: int, repeats: int,
               env: dict[str, str], cwd: str | None = None) -> dict[str, Any]:
    """Lines per second of ``clients`` concurrent batches against one batch alone."""
    lines = sum(1 for _ in batch.open())
    cmd = [sys.executable, "-m", "registry_db", "-d", url, "resolve", "--batch", str(batch)]
    run(cmd, env, cwd)
    one, many = [], []
    for _ in range(repeats):
        one.append(run(cmd, env, cwd)[0])
        start = time.perf_counter()
        procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  env=env, cwd=cwd) for _ in range(clients)]
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
                    "to run every command with too, interleaved")
    ap.add_argument("--other-source", type=Path,
                    help="another checkout's folder to run every command with too, interleaved")
    ap.add_argument("--label", default="")
    ap.add_argument("--only", help="comma-separated command names")
    ap.add_argument("--clients", type=int, default=0)
    ap.add_argument("--batch-lines", type=int, default=20_000)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    this = Variant(sys.executable, args.source)
    other = (Variant(args.other_python or sys.executable, args.other_source)
             if args.other_python or args.other_source else None)
    env = this.env
    layout = generate.default_layout(args.profiles, args.files)
    urls = {"postgresql": args.postgresql, "sqlite": args.sqlite}
    result: dict[str, Any] = {
        "label": args.label, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load "
                   f"{os.getloadavg()[0]:.1f} at the start",
        "source": str(args.source or HERE.parent), "repeats": args.repeats,
        "other": {"python": other.python, "source": str(other.source or "")} if other else None,
        "psycopg": {v.python: psycopg_install(v.python, v.env) for v in (this, other) if v},
        "commands": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        wanted = set(args.only.split(",")) if args.only else None
        for name, cmd_args in commands(work, layout).items():
            if wanted is None or name in wanted:
                row = pair(name, cmd_args, urls, args.repeats, env, this=this, other=other)
                _report(row)
                result["commands"].append(row)
        if wanted is None or "floor" in wanted:
            row = pair("floor", [], urls, args.repeats, env, this=this, other=other,
                       floor=True)
            _report(row)
            result["commands"].append(row)
        if args.clients:
            batch = work / "batch-clients.jsonl"
            batch.write_text("".join(json.dumps(r) + "\n"
                                     for r in generate.requests(layout, args.batch_lines)))
            row = concurrent(args.postgresql, batch, args.clients, max(1, args.repeats // 3),
                             env, this.cwd)
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
