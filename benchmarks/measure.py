"""The four measurements, each of ours against its raw baseline in the same run.

Every figure is the median of ``repeats`` runs; ours and the baseline alternate within a repeat
so that a noisy neighbour on the machine slows both. Imports, batches and the CLI run as fresh
processes on both sides, each paying one interpreter start; :func:`run_child` records each
child's wall time, CPU time (user + system, from ``wait4``) and peak RSS. The import is also
timed inside its process (``baselines.py import`` / ``ours-import``), which leaves out start-up
and is the steadier figure on a busy machine. Latency runs in this process against a warm engine.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import baselines
from backends import Backend

HERE = Path(__file__).resolve().parent

#: Modules the ``resolve`` command has no use for: importing one is start-up paid for nothing.
UNUSED_BY_RESOLVE = ("alembic", "mako", "yaml", "registry_db.importing.write",
                     "registry_db.inputs.profile_set", "registry_db.importing.export", "hypothesis",
                     "pytest")


def registry_command() -> list[str]:
    """The ``registry`` console script beside this interpreter, else ``python -m registry_db``."""
    script = Path(sys.executable).with_name("registry")
    return [str(script)] if script.exists() else [sys.executable, "-m", "registry_db"]


#: GNU time, which reports its child's peak RSS. ``wait4``'s own figure cannot be used: Linux
#: carries the forking parent's RSS high-water mark across fork and exec into the child's.
GNU_TIME = Path("/usr/bin/time")


#: The children run as an installed program runs: with its compiled bytecode cached (the
#: warm-up run writes it). ``PYTHONDONTWRITEBYTECODE`` in the caller's environment would make
#: every measured run compile the package's sources again: one ``registry resolve --json`` on
#: SQLite measured 4.3x ``python -c "import sqlite3"`` that way and 3.2x with the cache, same
#: machine, 20 runs each (the standard library's own bytecode is cached either way).
_CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_child(cmd: Sequence[str], what: str, stdout: Path | None = None,
              ok: tuple[int, ...] = (0,)) -> dict[str, Any]:
    """Run ``cmd``; its wall and CPU seconds, peak RSS (MiB) and stdout (unless sent to a file).

    CPU time is the child's own (``wait4``); the peak RSS comes from GNU time (``None`` where
    there is none).
    """
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryFile() as err, (
            open(stdout, "wb") if stdout is not None else tempfile.TemporaryFile()) as out:
        rss_file = Path(tmp) / "rss"
        prefix = [str(GNU_TIME), "-f", "%M", "-o", str(rss_file)] if GNU_TIME.exists() else []
        start = time.perf_counter()
        proc = subprocess.Popen(prefix + list(cmd), stdout=out, stderr=err, env=_CHILD_ENV)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        err.seek(0)
        if code not in ok:
            raise RuntimeError(f"{what} failed (exit {code}): {' '.join(map(str, cmd[:6]))} ..."
                               f"\n{err.read().decode(errors='replace')[-2000:]}")
        text = ""
        if stdout is None:
            out.seek(0)
            text = out.read().decode()
        rss = None
        if prefix:
            rss = int(rss_file.read_text().split()[-1]) / 1024
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "rss_mib": rss,
            "stdout": text}


def _median(runs: list[dict], key: str) -> Any:
    values = [r[key] for r in runs if r[key] is not None]
    return statistics.median(values) if values else None


def _summary(ours: list[float], base: list[float] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"ours_s": statistics.median(ours), "ours_runs": ours}
    if base:
        out["baseline_s"] = statistics.median(base)
        out["baseline_runs"] = base
        out["ratio"] = out["ours_s"] / out["baseline_s"]
    return out


def _baselines_py(*args: Any) -> list[str]:
    return [sys.executable, str(HERE / "baselines.py"), *map(str, args)]


# --- 1. import -----------------------------------------------------------------------------------

def rows_file(folder: Path) -> Path:
    """The baseline's prepared rows for ``folder`` (``marshal``), laid out once and kept."""
    # Named by layout: the rows now cover every table an import writes (revisions included).
    out = folder.with_name(folder.name + ".rows-all-tables.marshal")
    if not out.exists():
        run_child(_baselines_py("rows", folder, out), "baseline rows")
    return out


def import_ours(url: str, folder: Path) -> dict[str, Any]:
    """``registry import FOLDER`` into ``url``, as a fresh process."""
    return run_child(registry_command() + ["-d", url, "import", str(folder)], "registry import")


def import_ours_inproc(url: str, folder: Path) -> dict[str, Any]:
    """``import_paths`` timed inside a fresh process (no start-up): its ``cpu_s``, ``wall_s``."""
    child = run_child(_baselines_py("ours-import", url, folder), "ours-import")
    return json.loads(child["stdout"])


def import_baseline(url: str, folder: Path) -> dict[str, Any]:
    """libyaml's events + ``executemany`` into every table an import writes, as a fresh
    process; its own in-process timings too."""
    child = run_child(_baselines_py("import", url, folder, rows_file(folder)), "baseline import")
    child["inproc"] = json.loads(child["stdout"])
    return child


def bench_import(backend: Backend, folder: Path, repeats: int, baseline: bool = True,
                 inproc: bool = True) -> tuple[dict[str, Any], str]:
    """Import ``folder`` ``repeats`` times each way; the summary and a URL left loaded by ours.

    Per repeat: the baseline process, ours in process (``inproc``), then ``registry import``,
    each into a fresh database, then ``registry import`` of the same folder again (every file
    unchanged: ``reimport_s``, ``reimport_ratio`` against the fresh import). ``ours_s``/
    ``baseline_s``/``ratio`` are whole-process wall times; ``inproc`` holds the in-process CPU
    and wall figures; ``*_rss_mib`` the peak RSS.
    """
    ours, base, mine, again = [], [], [], []
    url = ""
    if baseline:
        rows_file(folder)
    for _ in range(repeats):
        if baseline:
            base.append(import_baseline(backend.fresh(), folder))
        if inproc:
            mine.append(import_ours_inproc(backend.fresh(), folder))
        url = backend.fresh()
        ours.append(import_ours(url, folder))
        again.append(import_ours(url, folder))
    backend.settle(url)
    out = _summary([r["wall_s"] for r in ours], [r["wall_s"] for r in base] or None)
    out["reimport_s"] = _median(again, "wall_s")
    out["reimport_cpu_s"] = _median(again, "cpu_s")
    out["reimport_ratio"] = out["reimport_s"] / _median(ours, "wall_s")
    out["ours_cpu_s"] = _median(ours, "cpu_s")
    out["ours_rss_mib"] = _median(ours, "rss_mib")
    if base:
        out["baseline_cpu_s"] = _median(base, "cpu_s")
        out["baseline_rss_mib"] = _median(base, "rss_mib")
        parts = [r["inproc"] for r in base]
        out["baseline_parts"] = {k: statistics.median(p[k] for p in parts) for k in (
            "parse_cpu_s", "parse_s", "write_cpu_s", "write_s")}
    if mine and base:
        b_cpu = [r["inproc"]["cpu_s"] for r in base]
        b_wall = [r["inproc"]["wall_s"] for r in base]
        o_cpu, o_wall = [r["cpu_s"] for r in mine], [r["wall_s"] for r in mine]
        out["inproc"] = {
            "ours_cpu_s": statistics.median(o_cpu), "baseline_cpu_s": statistics.median(b_cpu),
            "ratio_cpu": statistics.median(o_cpu) / statistics.median(b_cpu),
            "ours_wall_s": statistics.median(o_wall),
            "baseline_wall_s": statistics.median(b_wall),
            "ratio_wall": statistics.median(o_wall) / statistics.median(b_wall),
            "ours_cpu_runs": o_cpu, "baseline_cpu_runs": b_cpu}
    return out, url


# --- 2. batch resolution -------------------------------------------------------------------------

def library_requests(lines: Sequence[dict]) -> list[Any]:
    """The batch lines (registry layer, optional sets and fallback) as library requests."""
    from registry_db.model import Pin
    from registry_db.resolve.plan import Request

    return [Request(model=x["model"], method=x["method"], k=x["k"], thinking=x["thinking"],
                    category=x["category"],
                    pin=Pin(**x["pin"]) if x.get("pin") else None,
                    sets=tuple(x["sets"]) if x.get("sets") else None) for x in lines]


def resolve_many_ours(engine: Any, reqs: Sequence[Any]) -> list[Any]:
    """The library's many-at-once call."""
    from registry_db.resolve import plan as resolve

    return list(resolve.resolve_many(engine, reqs))


def _outcome(answer: Any) -> tuple:
    """(set, AL) of a library answer or a baseline dict, or (refusal reason,)."""
    if isinstance(answer, dict):
        if "refused" in answer:
            r = answer["refused"]
            return (r["reason"] if isinstance(r, dict) else r,)
        return answer["profile_set"], answer["acceptance_length"]
    if hasattr(answer, "reason"):
        return (answer.reason,)
    return answer.profile_set, answer.acceptance_length


def _answers(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def bench_batch(url: str, lines: Sequence[dict], repeats: int, work: Path) -> dict[str, Any]:
    """``registry resolve --batch`` against the raw set-based join and the raw point-query loop,
    all three as processes reading and writing JSON lines.

    The join alternates with ours every repeat; the loop, a reference ten times slower on
    PostgreSQL, runs once. Answers of ours and the join are compared line by line.
    """
    src = work / "batch-in.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    mine, join = work / "batch-ours.jsonl", work / "batch-join.jsonl"
    loop_out = work / "batch-loop.jsonl"
    ours_cmd = registry_command() + ["-d", url, "resolve", "--batch", str(src)]
    run_child(ours_cmd, "registry resolve --batch", stdout=mine)  # warm the page cache
    ours, base, loop = [], [], []
    for i in range(repeats):
        base.append(run_child(_baselines_py("batch-join", url, src, join), "batch-join"))
        ours.append(run_child(ours_cmd, "registry resolve --batch", stdout=mine))
        if i == 0:
            loop.append(run_child(_baselines_py("batch-loop", url, src, loop_out), "batch-loop"))
    out = _summary([r["wall_s"] for r in ours], [r["wall_s"] for r in base])
    n = len(lines)
    answers, expected = _answers(mine), _answers(join)
    out.update(
        requests=n, ours_per_s=n / out["ours_s"], baseline_per_s=n / out["baseline_s"],
        ours_cpu_s=_median(ours, "cpu_s"), baseline_cpu_s=_median(base, "cpu_s"),
        ratio_cpu=_median(ours, "cpu_s") / _median(base, "cpu_s"),
        ours_rss_mib=_median(ours, "rss_mib"), baseline_rss_mib=_median(base, "rss_mib"),
        loop_s=_median(loop, "wall_s"), loop_cpu_s=_median(loop, "cpu_s"),
        loop_rss_mib=_median(loop, "rss_mib"),
        ratio_loop=out["ours_s"] / _median(loop, "wall_s"),
        disagreements=len(answers) != n or sum(
            _outcome(a) != _outcome(e) for a, e in zip(answers, expected)),
        loop_disagreements=sum(_outcome(a) != _outcome(e)
                               for a, e in zip(_answers(loop_out), expected)))
    return out


# --- 3. one resolution from the command line -----------------------------------------------------

def resolve_argv(url: str, line: dict) -> list[str]:
    """``registry -d URL resolve ... --json`` for one batch line (registry layer only)."""
    argv = registry_command() + ["-d", url, "resolve", "--model", line["model"], "--method",
                                 line["method"], "--k", str(line["k"]), "--thinking",
                                 line["thinking"], "--category", line["category"], "--json"]
    for name in line.get("sets") or ():
        argv += ["--set", name]
    return argv


def bench_cli(url: str, line: dict, repeats: int) -> dict[str, Any]:
    """Wall time of one ``registry resolve --json`` against ``python -c "import sqlite3"``."""
    floor = [sys.executable, "-c", "import sqlite3"]
    ours, base = [], []
    run_child(resolve_argv(url, line), "registry resolve")  # warm the OS page cache
    for _ in range(repeats):
        base.append(run_child(floor, "python floor"))
        ours.append(run_child(resolve_argv(url, line), "registry resolve"))
    out = _summary([r["wall_s"] for r in ours], [r["wall_s"] for r in base])
    out.update(ours_cpu_s=_median(ours, "cpu_s"), baseline_cpu_s=_median(base, "cpu_s"),
               ours_rss_mib=_median(ours, "rss_mib"), baseline_rss_mib=_median(base, "rss_mib"))
    out["imports"] = startup_imports(url, line)
    return out


_IMPORTTIME = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)$")


def startup_imports(url: str, line: dict) -> dict[str, Any]:
    """What ``registry resolve`` imports (``-X importtime``) that it does not use, and the cost."""
    argv = resolve_argv(url, line)
    cmd = [sys.executable, "-X", "importtime", "-m", "registry_db"] + argv[
        argv.index("-d"):]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    cumulative: dict[str, int] = {}
    for row in proc.stderr.splitlines():
        found = _IMPORTTIME.match(row)
        if found:
            cumulative[found.group(4)] = int(found.group(2))
    unused = {name: cumulative[name] / 1e6 for name in UNUSED_BY_RESOLVE if name in cumulative}
    top = sorted(((n, us) for n, us in cumulative.items() if "." not in n),
                 key=lambda x: -x[1])[:12]
    return {"modules": len(cumulative), "unused": unused,
            "top_level_cumulative_s": {n: us / 1e6 for n, us in top}}


# --- 4. scaling: one resolution's latency --------------------------------------------------------

def bench_latency(url: str, lines: Sequence[dict], rounds: int = 3) -> dict[str, Any]:
    """Median latency of one ``resolve(engine, request)`` call, and of one raw SELECT."""
    from registry_db import store
    from registry_db.resolve import plan as resolve

    reqs = library_requests(lines)
    engine = store.open_registry(url, readonly=True)
    ours: list[float] = []
    try:
        for req in reqs[:20]:
            _call(resolve.resolve, engine, req)
        for _ in range(rounds):
            for req in reqs:
                start = time.perf_counter()
                _call(resolve.resolve, engine, req)
                ours.append(time.perf_counter() - start)
    finally:
        engine.dispose()
    base = _raw_latencies(url, lines, rounds)
    return {"ours_s": statistics.median(ours), "baseline_s": statistics.median(base),
            "ratio": statistics.median(ours) / statistics.median(base), "samples": len(ours)}


def _call(fn: Callable, engine: Any, req: Any) -> Any:
    from registry_db.errors import ResolutionRefused

    try:
        return fn(engine, req)
    except ResolutionRefused as exc:
        return exc


def _raw_latencies(url: str, lines: Sequence[dict], rounds: int) -> list[float]:
    """Per-request latency of the raw SELECT on one open connection."""
    sql = baselines.lookup_sql(url)
    out = []
    with baselines.raw_connection(url) as conn:
        cur = conn.cursor()
        for _ in range(rounds):
            for line in lines:
                start = time.perf_counter()
                baselines.lookup(cur, sql, line, line["category"], line.get("sets"))
                out.append(time.perf_counter() - start)
    return out
