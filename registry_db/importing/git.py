"""Where imported files came from in git: the commit, whether each file is that commit's, and
its path in the repository, read once per import with the ``git`` program.

Nothing here may fail an import: no ``git`` on ``PATH``, a folder outside any work tree, a
repository without commits, one git refuses (``safe.directory``), a git that errs or takes
longer than :data:`TIMEOUT` seconds all give no provenance for the files concerned, silently.
``git`` runs with ``GIT_OPTIONAL_LOCKS=0``: ``status`` then neither takes the index lock nor
rewrites the index, so an import never gets in the way of the user's own git command.

A file is *dirty* when ``git status`` names it: changed in the work tree or the index against
``HEAD``, untracked, or ignored; that is, when its bytes are not the commit's (docs/history.md:
per file, not the whole tree: another file's edit says nothing about this set).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from registry_db.model import GitOrigin

__all__ = ["TIMEOUT", "GitOrigin", "origins"]

#: Seconds each git command may take before the import goes on without provenance.
TIMEOUT = 10.0


def origins(files: Iterable[str | os.PathLike[str]]) -> dict[str, GitOrigin]:
    """``{file as given: its GitOrigin}`` for each of ``files`` inside a git work tree with a
    commit; the others are left out. Two git commands per repository in the common case
    (``rev-parse`` once for the folders of one repository, ``status`` once for all its files),
    never one per file."""
    git = shutil.which("git")
    if git is None:
        return {}
    by_folder: dict[Path, list[tuple[str, str]]] = defaultdict(list)
    for f in files:
        given = os.fspath(f)
        try:
            folder = Path(given).parent.resolve()
        except (OSError, RuntimeError):  # a loop of links: no place to name
            continue
        by_folder[folder].append((given, Path(given).name))
    repos: list[tuple[Path, str]] = []  # (top folder, HEAD), shallowest folders first
    files_of: dict[Path, list[tuple[str, str]]] = defaultdict(list)
    for folder in sorted(by_folder, key=lambda p: (len(p.parts), str(p))):
        repo = next((r for r in repos if folder.is_relative_to(r[0])), None)
        if repo is None:
            found = _top_and_head(git, folder)
            if found is None:
                continue
            repo = found
            repos.append(repo)
        top = repo[0]
        for given, name in by_folder[folder]:
            files_of[top].append((given, (folder / name).relative_to(top).as_posix()))
    out: dict[str, GitOrigin] = {}
    for top, head in repos:
        entries = files_of[top]
        dirty = _dirty(git, top, [path for _, path in entries])
        if dirty is None:
            continue
        out.update((given, GitOrigin(head, path in dirty, path)) for given, path in entries)
    return out


def _run(git: str, folder: Path, *args: str) -> bytes | None:
    """``git -C folder ARGS``' stdout, or None when it cannot run, errs or times out."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"}
    try:
        done = subprocess.run([git, "-C", str(folder), *args], capture_output=True,
                              stdin=subprocess.DEVNULL, timeout=TIMEOUT, env=env, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _top_and_head(git: str, folder: Path) -> tuple[Path, str] | None:
    """The work tree's top folder and ``HEAD``'s hash, or None outside one (or before its
    first commit, a bare repository, a ``.git`` folder itself)."""
    out = _run(git, folder, "rev-parse", "--show-toplevel", "--verify", "-q", "HEAD")
    lines = [] if out is None else out.decode("utf-8", "surrogateescape").splitlines()
    if len(lines) != 2 or not lines[0]:
        return None
    head = lines[1].strip()
    if len(head) not in (40, 64) or any(c not in "0123456789abcdef" for c in head):
        return None
    try:
        return Path(lines[0]).resolve(), head
    except (OSError, RuntimeError):
        return None


def _dirty(git: str, top: Path, paths: list[str]) -> set[str] | None:
    """Which of ``paths`` (from the top of the work tree) ``git status`` names, or None when
    it fails. Literal pathspecs: a file named ``*.yaml`` is that file."""
    out = _run(git, top, "--literal-pathspecs", "status", "--porcelain", "-z",
               "--untracked-files=all", "--ignored", "--no-renames", "--", *paths)
    if out is None:
        return None
    named = set()
    for entry in out.split(b"\0"):
        if len(entry) > 3:  # "XY PATH"
            named.add(entry[3:].decode("utf-8", "surrogateescape"))
    return named
