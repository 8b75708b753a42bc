"""Another checkout's code against this one's, back to back on the same registry: one
``registry resolve --json`` (fresh process) and one ``registry resolve --batch`` of 100,000 lines,
the two alternating run by run, on the registries ``as_of.py`` leaves in ``--work-dir``.

    git archive OLD registry_db | tar -x -C /tmp/old        # the code to compare with
    python benchmarks/as_of.py                               # builds the registries once
    python benchmarks/before_after.py /tmp/old --batch-runs 2

The old code is imported through ``PYTHONPATH`` (it must read the same schema). Wall time and
CPU time (the child's own, from ``getrusage``) per run, medians in the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import generate  # noqa: E402
from as_of import PG_DATABASE  # noqa: E402
from backends import _with_database, default_postgres_url, git_revision, machine  # noqa: E402
from measure import registry_command  # noqa: E402

HERE = Path(__file__).resolve().parent


def _run(old: Path | None, args: list[str]) -> tuple[float, float]:
    env = dict(os.environ)
    if old is not None:
        env["PYTHONPATH"] = str(old)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(registry_command() + args, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):  # a batch with refusals exits 1 only for bad lines
        raise RuntimeError(done.stderr.decode(errors="replace")[-1000:])
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def compare(old: Path, args: list[str], runs: int) -> dict[str, Any]:
    """``runs`` of each, alternating (which goes first alternates too), after one warm-up."""
    _run(None, args)
    got: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}
    for i in range(runs):
        for code in (("old", "new") if i % 2 == 0 else ("new", "old")):
            got[code].append(_run(old if code == "old" else None, args))
    out: dict[str, Any] = {}
    for code, values in got.items():
        out[code] = {"wall_s": statistics.median(w for w, _ in values),
                     "cpu_s": statistics.median(c for _, c in values), "runs": values}
    out["ratio_wall"] = out["new"]["wall_s"] / out["old"]["wall_s"]
    out["ratio_cpu"] = out["new"]["cpu_s"] / out["old"]["cpu_s"]
    return out


def main(argv: list[str] | None = None) -> int:
    """Compare, print, write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path, help="A folder holding the other checkout's registry_db.")
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--profiles", type=int, default=100_000)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--cli-runs", type=int, default=10)
    ap.add_argument("--batch-runs", type=int, default=2)
    ap.add_argument("--postgres-url", default=default_postgres_url())
    ap.add_argument("--work-dir", type=Path, default=HERE / "work")
    ap.add_argument("--json-out", type=Path, default=HERE / "results" / "before_after.json")
    args = ap.parse_args(argv)
    layout = generate.default_layout(args.profiles, args.files)
    batch = args.work_dir / f"as_of-requests-{args.profiles}.jsonl"
    if not batch.exists():
        batch.write_text("".join(json.dumps(r) + "\n"
                                 for r in generate.requests(layout, args.profiles)))
    hit = next(generate.hit_requests(layout, 1))
    one = ["resolve", "--model", hit["model"], "--method", hit["method"], "--k", str(hit["k"]),
           "--thinking", hit["thinking"], "--category", hit["category"], "--json"]
    results = {}
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        url = (f"sqlite:///{args.work_dir / f'as_of-{args.profiles}.db'}" if backend == "sqlite"
               else _with_database(args.postgres_url, PG_DATABASE))
        results[backend] = {
            "cli": compare(args.old, ["-d", url, *one], args.cli_runs),
            "batch": compare(args.old, ["-d", url, "resolve", "--batch", str(batch)],
                             args.batch_runs)}
        for what, r in results[backend].items():
            print(f"{backend} {what}: old {r['old']['wall_s']:.3f} s wall {r['old']['cpu_s']:.3f}"
                  f" s CPU, new {r['new']['wall_s']:.3f} s wall {r['new']['cpu_s']:.3f} s CPU",
                  file=sys.stderr)
    record = {"command": "python benchmarks/before_after.py " + " ".join(
                  sys.argv[1:] if argv is None else argv),
              "git": git_revision(HERE.parent), "old": str(args.old),
              "machine": machine(args.postgres_url if "postgresql" in args.backends else None),
              "load_average": [round(x, 2) for x in os.getloadavg()], "results": results}
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
