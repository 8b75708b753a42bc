"""Where a PostgreSQL command's start-up goes below the registry's code: the driver's import,
the connection, the schema check and a statement, and the same floor with other drivers.

``phases`` times, in each of ``repeats`` fresh interpreters, ``import psycopg``, the connection
:func:`registry_db.store.pg_read.open_readonly` opens (same keywords and options), its
``alembic_version`` check and one more statement (what merging the check into the resolution's
statement could save: one round trip); medians of CPU (``process_time``) and wall.

``drivers`` runs bare interpreters in turn, interleaved (``repeats`` rounds after a warm-up):
``python -c pass``, sqlite3's floor (import, connect, one SELECT), psycopg's (this
interpreter's install) and its import alone, ``importlib.metadata`` alone (psycopg-binary's and
psycopg-c's ``version`` modules import it), and with ``--psycopg2-python PY`` the same floor
with psycopg2 (another virtual environment). Medians, and the pairs' ratios to sqlite3's:

    python benchmarks/pg_floor.py --sqlite sqlite:////tmp/r.db \\
        --postgresql postgresql://postgres@127.0.0.1:5432/bench [--psycopg2-python PY]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Any

import pg_commands

PHASES = """\
import json, time
def now(): return time.process_time(), time.perf_counter()
a = now()
import psycopg
b = now()
from registry_db.store import pg_read
kw = pg_read.connect_kwargs({url!r})
kw.update(connect_timeout=pg_read.CONNECT_TIMEOUT, options=pg_read.READ_ONLY_OPTIONS,
          autocommit=True)
c0 = now()
c = psycopg.connect(**kw)
c1 = now()
c.execute("SELECT version_num FROM alembic_version").fetchall()
c2 = now()
c.execute("SELECT version_num FROM alembic_version").fetchall()
c3 = now()
spans = ((a, b), (c0, c1), (c1, c2), (c2, c3))
print(json.dumps([[y - x for x, y in zip(s, e)] for s, e in spans]))
"""

NAMES = ["import psycopg", "connect", "schema check", "one more statement"]


def phases(url: str, repeats: int, env: dict[str, str]) -> dict[str, Any]:
    """Medians of each phase's CPU and wall seconds, in fresh interpreters."""
    from registry_db.store.urls import normalize_url

    code = PHASES.format(url=normalize_url(url))
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], env=env, check=True,
                                      capture_output=True, text=True).stdout)
            for _ in range(repeats + 1)][1:]
    return {name: {"cpu_s": statistics.median(r[i][0] for r in runs),
                   "wall_s": statistics.median(r[i][1] for r in runs)}
            for i, name in enumerate(NAMES)}


def drivers(urls: dict[str, str], repeats: int, env: dict[str, str],
            psycopg2_python: str | None) -> dict[str, Any]:
    """Bare interpreters' floors, interleaved; medians and paired ratios to sqlite3's."""
    from registry_db.store.pg_read import connect_kwargs
    from registry_db.store.urls import normalize_url

    floor = pg_commands.floor_commands(urls)
    cmd = {"python -c pass": [sys.executable, "-c", "pass"],
           "sqlite3": floor["sqlite"],
           "psycopg": floor["postgresql"],
           "import psycopg": [sys.executable, "-c", "import psycopg"],
           "import importlib.metadata": [sys.executable, "-c", "import importlib.metadata"]}
    if psycopg2_python:
        kw = connect_kwargs(normalize_url(urls["postgresql"]))
        cmd["psycopg2"] = [psycopg2_python, "-c",
                           f"import psycopg2\nc = psycopg2.connect(**{kw!r})\n"
                           "c.autocommit = True\nk = c.cursor()\n"
                           "k.execute('SELECT version_num FROM alembic_version')\nk.fetchall()"]
    runs: dict[str, list[tuple[float, float, int]]] = {k: [] for k in cmd}
    for i in range(repeats + 1):
        for k, c in cmd.items():
            r = pg_commands.run(c, env)
            assert r[2] == 0, (k, r)
            if i:
                runs[k].append(r)
    base = runs["sqlite3"]
    return {k: {"wall_s": statistics.median(r[0] for r in rs),
                "cpu_s": statistics.median(r[1] for r in rs),
                "cpu_min_s": min(r[1] for r in rs),
                "ratio_wall": statistics.median(a[0] / b[0] for a, b in zip(rs, base)),
                "ratio_cpu": statistics.median(a[1] / b[1] for a, b in zip(rs, base))}
            for k, rs in runs.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sqlite", required=True)
    ap.add_argument("--postgresql", required=True)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--psycopg2-python", help="an interpreter with psycopg2 installed")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    env = pg_commands._env(None)
    urls = {"postgresql": args.postgresql, "sqlite": args.sqlite}
    result: dict[str, Any] = {"load_start": round(os.getloadavg()[0], 2),
                              "psycopg": pg_commands.psycopg_install(sys.executable, env),
                              "repeats": args.repeats}
    result["phases"] = phases(args.postgresql, args.repeats, env)
    for name, row in result["phases"].items():
        print(f"{name:28} cpu {row['cpu_s'] * 1e3:7.2f} ms  wall {row['wall_s'] * 1e3:7.2f} ms",
              file=sys.stderr)
    result["drivers"] = drivers(urls, args.repeats, env, args.psycopg2_python)
    for name, row in result["drivers"].items():
        print(f"{name:28} cpu {row['cpu_s'] * 1e3:7.1f} ms (best {row['cpu_min_s'] * 1e3:6.1f})"
              f"  wall {row['wall_s'] * 1e3:7.1f} ms  / sqlite3: cpu {row['ratio_cpu']:.2f}"
              f"  wall {row['ratio_wall']:.2f}", file=sys.stderr)
    result["load_end"] = round(os.getloadavg()[0], 2)
    text = json.dumps(result, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
