"""Two checkouts of different schemas, each on its own registry, the same measurement alternating.

``before_after.py`` runs old code on this checkout's registry, which needs the same schema. Across
a schema change (the start of a round against its end) each checkout imports the same generated
files into its own database, and this script, run by each checkout's interpreter in turn, times
``resolve()`` (median per call over hit requests) and ``resolve_many()`` (best of 3 over a
batch), in process:

    python benchmarks/generate.py /tmp/reg --profiles 100000 --files 200      # the files
    OLD/.venv/bin/registry -d sqlite:////tmp/old.db import /tmp/reg
    .venv/bin/registry -d sqlite:////tmp/new.db import /tmp/reg
    python benchmarks/across.py --old-python OLD/.venv/bin/python --old-url sqlite:////tmp/old.db \\
        --new-url sqlite:////tmp/new.db --work /tmp --profiles 100000 --files 200

The child side imports whichever layout its checkout has (``registry_db.resolve.plan`` now,
``registry_db.resolve`` with ``registry_db.requests`` before the round's layout work).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()


def _library() -> tuple[Any, Any, Any, Any]:
    """open_registry, Request, resolve, resolve_many of whichever layout is importable."""
    try:
        from registry_db.resolve.plan import Request, resolve, resolve_many
        from registry_db.store import open_registry
    except ImportError:  # the flat layout before the round's redesign
        from registry_db.db import open_registry  # type: ignore[no-redef]
        from registry_db.requests import Request  # type: ignore[no-redef]
        from registry_db.resolve import resolve, resolve_many  # type: ignore[no-redef]
    return open_registry, Request, resolve, resolve_many


def child(url: str, hits_path: str, batch_path: str) -> dict[str, float]:
    """This checkout's figures on ``url``: µs per resolve() of a hit, s per resolve_many()."""
    from registry_db.errors import ResolutionRefused

    open_registry, request, resolve, resolve_many = _library()

    def requests(path: str) -> list[Any]:
        lines = [json.loads(line) for line in open(path, encoding="utf-8")]
        return [request(ln["model"], ln["method"], ln["k"], ln.get("thinking"),
                        ln.get("category")) for ln in lines]

    hits, batch = requests(hits_path), requests(batch_path)
    engine = open_registry(url, readonly=True)
    calls = []
    for r in hits[:50] + hits:
        start = time.perf_counter()
        try:
            resolve(engine, r)
        except ResolutionRefused:
            pass
        calls.append(time.perf_counter() - start)
    resolve_many(engine, batch[:100])
    many = []
    for _ in range(3):
        start = time.perf_counter()
        resolve_many(engine, batch)
        many.append(time.perf_counter() - start)
    engine.dispose()
    return {"resolve_us": statistics.median(calls[50:]) * 1e6, "resolve_many_s": min(many)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old-python", required=True, help="the other checkout's interpreter")
    ap.add_argument("--old-url", required=True)
    ap.add_argument("--new-url", required=True)
    ap.add_argument("--work", type=Path, default=Path("/tmp"), help="where the requests go")
    ap.add_argument("--profiles", type=int, default=100_000, help="as given to generate.py")
    ap.add_argument("--files", type=int, default=200, help="as given to generate.py")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=100_000, help="the batch's size")
    ap.add_argument("--out", type=Path, help="also write every round's figures here, as JSON")
    ap.add_argument("--child", nargs=3, metavar=("URL", "HITS", "BATCH"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0
    sys.path.insert(0, str(HERE.parent))
    import generate

    layout = generate.default_layout(args.profiles, args.files)
    hits, batch = args.work / "across-hits.jsonl", args.work / "across-batch.jsonl"
    hits.write_text("".join(json.dumps(ln) + "\n" for ln in generate.hit_requests(layout, 2000)))
    batch.write_text("".join(json.dumps(ln) + "\n"
                             for ln in generate.requests(layout, args.requests)))
    out: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for _ in range(args.rounds):
        for side, python, url in (("old", args.old_python, args.old_url),
                                  ("new", sys.executable, args.new_url)):
            done = subprocess.run([python, str(HERE), "--old-python", "-", "--old-url", "-",
                                   "--new-url", "-", "--child", url, str(hits), str(batch)],
                                  capture_output=True, text=True, check=True)
            out[side].append(json.loads(done.stdout))
            print(side, out[side][-1], flush=True)
    ratios: dict[str, list[float]] = {}
    for key in ("resolve_us", "resolve_many_s"):
        ratios[key] = [n[key] / o[key] for o, n in zip(out["old"], out["new"])]
        print(f"{key}: new / old per round {', '.join(f'{r:.2f}' for r in ratios[key])}")
    if args.out is not None:
        args.out.write_text(json.dumps({
            "old_url": args.old_url, "new_url": args.new_url, "profiles": args.profiles,
            "files": args.files, "requests": args.requests, "rounds": out,
            "new_over_old": ratios}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
