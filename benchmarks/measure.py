"""The four measurements, each of ours against its raw baseline in the same run.

Every figure is the median of ``repeats`` runs; ours and the baseline alternate within a repeat
so that a noisy neighbour on the machine slows both. Imports run as fresh processes on both
sides (``registry import`` and ``python benchmarks/baselines.py import``) so each pays one
interpreter start; resolutions run in this process against a warm engine or connection.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import baselines
from backends import Backend

HERE = Path(__file__).resolve().parent

#: Modules the ``resolve`` command has no use for: importing one is start-up paid for nothing.
UNUSED_BY_RESOLVE = ("alembic", "mako", "yaml", "registry_db.store.write", "registry_db.inputs.profile_set",
                     "registry_db.store.export", "hypothesis", "pytest")


def registry_command() -> list[str]:
    """The ``registry`` console script beside this interpreter, else ``python -m registry_db``."""
    script = Path(sys.executable).with_name("registry")
    return [str(script)] if script.exists() else [sys.executable, "-m", "registry_db"]


def _run(cmd: Sequence[str], what: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd[:6])} ...\n"
                           f"{proc.stderr[-2000:]}")
    return elapsed


def _summary(ours: list[float], base: list[float] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"ours_s": statistics.median(ours), "ours_runs": ours}
    if base:
        out["baseline_s"] = statistics.median(base)
        out["baseline_runs"] = base
        out["ratio"] = out["ours_s"] / out["baseline_s"]
    return out


# --- 1. import -----------------------------------------------------------------------------------

def import_ours(url: str, folder: Path) -> float:
    """Wall time of ``registry import FOLDER`` into ``url``."""
    return _run(registry_command() + ["-d", url, "import", str(folder)], "registry import")


def import_baseline(url: str, folder: Path) -> float:
    """Wall time of the raw baseline importing ``folder`` into ``url``, in its own process."""
    return _run([sys.executable, str(HERE / "baselines.py"), "import", url, str(folder)],
                "baseline import")


def bench_import(backend: Backend, folder: Path, repeats: int,
                 baseline: bool = True) -> tuple[dict[str, Any], str]:
    """Import ``folder`` ``repeats`` times each way; the summary and a URL left loaded by ours."""
    ours, base = [], []
    url = ""
    for _ in range(repeats):
        if baseline:
            base.append(import_baseline(backend.fresh(), folder))
        url = backend.fresh()
        ours.append(import_ours(url, folder))
    backend.settle(url)
    return _summary(ours, base or None), url


# --- 2. batch resolution -------------------------------------------------------------------------

def library_requests(lines: Sequence[dict]) -> list[Any]:
    """The batch lines (registry layer, optional sets and fallback) as library requests."""
    from registry_db.resolve.plan import Request
    from registry_db.model import Pin

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


def bench_batch(url: str, lines: Sequence[dict], repeats: int) -> dict[str, Any]:
    """``resolve_many`` over every line against one SELECT per line through the driver."""
    from registry_db import store

    reqs = library_requests(lines)
    engine = store.open_registry(url, readonly=True)
    try:
        resolve_many_ours(engine, reqs[:100])  # warm the pool and the statement caches
        ours, base = [], []
        answers = expected = None
        for _ in range(repeats):
            start = time.perf_counter()
            expected = baselines.raw_resolve(url, lines)
            base.append(time.perf_counter() - start)
            start = time.perf_counter()
            answers = resolve_many_ours(engine, reqs)
            ours.append(time.perf_counter() - start)
    finally:
        engine.dispose()
    out = _summary(ours, base)
    n = len(lines)
    out.update(requests=n, ours_per_s=n / out["ours_s"], baseline_per_s=n / out["baseline_s"],
               disagreements=sum(_outcome(a) != _outcome(e) for a, e in zip(answers, expected)))
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
    _run(resolve_argv(url, line), "registry resolve")  # warm the OS page cache
    for _ in range(repeats):
        base.append(_run(floor, "python floor"))
        ours.append(_run(resolve_argv(url, line), "registry resolve"))
    out = _summary(ours, base)
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
