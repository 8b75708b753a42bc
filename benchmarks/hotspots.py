"""Profile one slow path of the library, in process, with cProfile (or pyinstrument if asked).

    python benchmarks/hotspots.py import --profiles 100000 --files 200 [--backend postgresql]
    python benchmarks/hotspots.py batch --profiles 100000 --requests 100000
    python benchmarks/hotspots.py one --profiles 10000 --requests 2000
    python benchmarks/hotspots.py cli-batch --profiles 100000 --requests 100000

``import`` profiles ``import_paths`` into a fresh database; ``batch`` profiles ``resolve_many``
and ``one`` a loop of ``resolve`` calls, both against a registry loaded by the raw baseline
(the rows are the same); ``cli-batch`` profiles the whole ``registry resolve --batch FILE``
command in process (JSON lines in and out included, stdout sent to /dev/null). Prints the top
functions by cumulative time and writes the full statistics next to the work files
(``.pstats``; open with ``python -m pstats`` or snakeviz).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import baselines  # noqa: E402
import generate  # noqa: E402
import measure  # noqa: E402
from backends import Backend, default_postgres_url  # noqa: E402

HERE = Path(__file__).resolve().parent


def _profile(fn: Callable[[], object], out: Path, top: int, use_pyinstrument: bool) -> None:
    if use_pyinstrument:
        from pyinstrument import Profiler

        sampler = Profiler(interval=0.001)
        sampler.start()
        fn()
        sampler.stop()
        print(sampler.output_text(unicode=True, color=False, show_all=False))
        return
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    prof.dump_stats(out)
    stats = pstats.Stats(str(out))
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    print(f"full statistics: {out}")


def _cli_batch(url: str, layout: generate.Layout, n: int, tmp: Path) -> None:
    """``registry -d URL resolve --batch FILE`` in this process, answers to /dev/null."""
    import contextlib
    import json

    from registry_db.cli import main as cli_main

    src = tmp / "batch.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in generate.requests(layout, n)))
    with open("/dev/null", "w") as sink, contextlib.redirect_stdout(sink):
        try:
            cli_main(["-d", url, "resolve", "--batch", str(src)], standalone_mode=True)
        except SystemExit:
            pass


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("import", "batch", "one", "cli-batch"))
    ap.add_argument("--profiles", type=int, default=100_000)
    ap.add_argument("--files", type=int, default=None, help="default: profiles / 500")
    ap.add_argument("--requests", type=int, default=None, help="default: as many as profiles")
    ap.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    ap.add_argument("--postgres-url", default=default_postgres_url())
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--pyinstrument", action="store_true")
    ap.add_argument("--work-dir", type=Path, default=HERE / "work")
    args = ap.parse_args(argv)
    files = args.files or max(2, args.profiles // 500)
    layout = generate.default_layout(args.profiles, files)
    folder = args.work_dir / f"registry-{args.profiles}-{files}"
    if not (folder / ".complete").exists():
        generate.write_registry(layout, folder)
        (folder / ".complete").write_text("")
    paths = sorted(folder.glob("*.yaml"))
    out = args.work_dir / f"profile-{args.what}-{args.backend}-{args.profiles}.pstats"
    from registry_db import store

    with tempfile.TemporaryDirectory(dir=args.work_dir) as tmp:
        backend = Backend(args.backend, Path(tmp), args.postgres_url)
        try:
            url = backend.fresh()
            if args.what == "import":
                from registry_db.importing.write import import_paths

                engine = store.open_registry(url)
                _profile(lambda: import_paths(engine, paths), out, args.top, args.pyinstrument)
                engine.dispose()
                return 0
            baselines.raw_import(url, paths)
            backend.settle(url)
            n = args.requests or args.profiles
            engine = store.open_registry(url, readonly=True)
            if args.what == "cli-batch":
                _profile(lambda: _cli_batch(url, layout, n, Path(tmp)), out, args.top,
                         args.pyinstrument)
            elif args.what == "batch":
                reqs = measure.library_requests(list(generate.requests(layout, n)))
                measure.resolve_many_ours(engine, reqs[:100])
                _profile(lambda: measure.resolve_many_ours(engine, reqs), out, args.top,
                         args.pyinstrument)
            else:
                from registry_db.resolve.plan import resolve

                reqs = measure.library_requests(list(generate.hit_requests(layout, n)))
                _profile(lambda: [resolve(engine, r) for r in reqs], out, args.top,
                         args.pyinstrument)
            engine.dispose()
        finally:
            backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
