"""A streamed ``registry resolve --batch`` against another checkout's (issue 30.4), one run each:
throughput (wall and CPU), peak memory (the child's maximum resident set, from ``wait4``) and
first-answer latency on a pipe (a writer sends one line, then waits: how long until the
answer comes; the old code answers only once the input ends, which the writer does after
``--hold`` seconds). Answers are compared byte for byte.

    git archive OLD registry_db | tar -x -C /tmp/old
    python benchmarks/batch_stream.py /tmp/old sqlite:///reg.db requests.jsonl --runs 2

The requests are ``generate.requests`` lines (``python benchmarks/generate.py`` builds the
registry's files; import them first). The old code is imported through ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from backends import git_revision, machine  # noqa: E402
from measure import registry_command, run_child  # noqa: E402


def _env(old: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_")}
    if old is not None:
        env["PYTHONPATH"] = str(old)
    return env


def throughput(old: Path | None, url: str, batch: Path, out: Path) -> dict[str, float]:
    """One whole batch from a file: wall and CPU seconds, peak RSS (GNU time) of the child."""
    prefix = ["env", f"PYTHONPATH={old}"] if old is not None else []
    got = run_child(prefix + registry_command() + ["-d", url, "resolve", "--batch", str(batch)],
                    "batch", stdout=out, ok=(0, 1))
    return {"wall_s": got["wall_s"], "cpu_s": got["cpu_s"], "peak_rss_mib": got["rss_mib"]}


def first_answer(old: Path | None, url: str, line: str, hold: float) -> dict[str, Any]:
    """Seconds from writing one line to reading its answer, the input held open ``hold`` s."""
    proc = subprocess.Popen(registry_command() + ["-d", url, "resolve", "--batch", "-"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=_env(old))
    assert proc.stdin is not None and proc.stdout is not None
    time.sleep(1.0)  # the interpreter's start-up is not the latency measured
    start = time.perf_counter()
    proc.stdin.write(line.encode() + b"\n")
    proc.stdin.flush()
    ready, _, _ = select.select([proc.stdout], [], [], hold)
    closed_first = not ready
    if closed_first:
        proc.stdin.close()
        select.select([proc.stdout], [], [], 120)
    proc.stdout.readline()
    latency = time.perf_counter() - start
    if not closed_first:
        proc.stdin.close()
    proc.wait(120)
    return {"latency_s": latency, "answered_before_input_ended": not closed_first}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path, help="a folder holding the other checkout's registry_db")
    ap.add_argument("url")
    ap.add_argument("batch", type=Path)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--hold", type=float, default=5.0)
    ap.add_argument("--json-out", type=Path, default=HERE / "results" / "batch_stream.json")
    args = ap.parse_args(argv)
    work = args.json_out.parent
    work.mkdir(parents=True, exist_ok=True)
    line = args.batch.open().readline().strip()
    results: dict[str, Any] = {"old": [], "new": []}
    for i in range(args.runs):
        for code in (("old", "new") if i % 2 == 0 else ("new", "old")):
            got = throughput(args.old if code == "old" else None, args.url, args.batch,
                             work / f"batch-{code}.jsonl")
            print(code, got, file=sys.stderr)
            results[code].append(got)
    same = filecmp.cmp(work / "batch-old.jsonl", work / "batch-new.jsonl", shallow=False)
    latency = {code: first_answer(args.old if code == "old" else None, args.url, line,
                                  args.hold) for code in ("old", "new")}
    record = {"command": "python benchmarks/batch_stream.py " + " ".join(
                  sys.argv[1:] if argv is None else argv),
              "git": git_revision(HERE.parent), "old": str(args.old),
              "lines": sum(1 for _ in args.batch.open()), "machine": machine(None),
              "load_average": [round(x, 2) for x in os.getloadavg()],
              "throughput": results, "answers_identical": same, "first_answer": latency}
    args.json_out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: record[k] for k in ("answers_identical", "first_answer")}),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
