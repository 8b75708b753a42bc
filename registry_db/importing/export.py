"""Stored sets back to YAML files that import to the same rows.

Each set is rendered by :mod:`registry_db.yaml.render` (the spec's document, shared
provenances as anchor and aliases, numbers that round-trip) and goes to ``<name>.yaml`` in the
output folder, written to a temporary file and renamed, so an interrupted export never leaves
half a file. A set whose name is not a safe file name
(empty, hidden, holding ``/``, ``\\`` or NUL, or too long) is refused before anything is
written; ``-o -`` prints such a set instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from sqlalchemy.engine import Engine

from registry_db import history
from registry_db.errors import NotFound, RegistryError
from registry_db.model import ProfileSet
from registry_db.store import read as store
from registry_db.yaml.render import (
    file_name,
    refuse_overwrites,
    render_set,
    set_document,
    write_atomically,
)

__all__ = ["current_sets", "export_sets", "file_name", "one_set_only", "render_one",
           "render_set", "render_sets", "set_document", "write_sets"]


def export_sets(engine: Engine, names: Sequence[str] | None = None,
                out_dir: str | Path = ".", *, force: bool = False,
                progress: Callable[[str, int, int], None] | None = None) -> list[Path]:
    """Write each named set (every set when ``names`` is None or empty) to ``out_dir``:
    :func:`write_sets` of :func:`current_sets`."""
    return write_sets(current_sets(engine, names), out_dir, force=force, progress=progress)


def current_sets(engine: Engine, names: Sequence[str] | None = None) -> list[ProfileSet]:
    """The named stored sets (every set when ``names`` is None or empty). An unknown name
    raises :class:`~registry_db.errors.NotFound`; for a deleted set, it says when it was
    deleted and which revision holds its last content."""
    try:
        return store.load_sets(engine, list(names) if names else None)
    except NotFound:
        for name in names or ():
            gone = history.deleted_message(engine, name)
            if gone is not None:
                raise NotFound(gone) from None
        raise


def write_sets(sets: Sequence[ProfileSet], out_dir: str | Path = ".", *, force: bool = False,
               progress: Callable[[str, int, int], None] | None = None) -> list[Path]:
    """Write each set to ``out_dir/<name>.yaml``; the written paths, in set order.

    Unsafe names raise before any file is written; a folder that cannot be written raises
    :class:`~registry_db.errors.RegistryError`. An existing file whose content differs from
    the export (a hand-written file, its comments included) is replaced only with ``force``;
    otherwise :class:`RegistryError` names every such file and nothing is written.
    ``progress("export", done, total)`` is called as each set is written.
    """
    targets = [file_name(ps.name) for ps in sets]
    out = Path(out_dir)
    texts = [render_set(ps) for ps in sets]
    written = []
    try:
        if not force:
            refuse_overwrites([(out / t, text) for t, text in zip(targets, texts)],
                              "choose another folder with -o")
        out.mkdir(parents=True, exist_ok=True)
        for text, target in zip(texts, targets):
            path = out / target
            write_atomically(path, text)
            written.append(path)
            if progress is not None:
                progress("export", len(written), len(targets))
    except OSError as exc:
        raise RegistryError(f"cannot write to {exc.filename or out}: {exc.strerror or exc}; "
                            "choose another folder with -o") from exc
    return written


def render_sets(engine: Engine, names: Sequence[str] | None = None) -> str:
    """The one named set (or the registry's only set when ``names`` is empty) as YAML text.

    Several sets are refused: a stream of documents is not an input ``registry import`` reads
    (one set per file), so printing one would promise a round trip that does not exist.
    """
    one_set_only(names)
    return render_one(current_sets(engine, names))


def one_set_only(names: Sequence[str] | None) -> None:
    """Refuse several names for ``-o -`` (before anything is read)."""
    if names and len(set(names)) > 1:
        raise RegistryError(f"-o - prints one set, and {len(set(names))} were named; name one "
                            "SET, or write them all to a folder with -o DIR (import reads one "
                            "set per file)")


def render_one(sets: Sequence[ProfileSet]) -> str:
    """The one set of ``sets`` as YAML text (several refused, as in :func:`render_sets`)."""
    if len(sets) > 1:
        shown = ", ".join(ps.name for ps in sets[:3]) + (", ..." if len(sets) > 3 else "")
        raise RegistryError(f"-o - prints one set, and the registry holds {len(sets)} ({shown}); "
                            "name one SET, or write them all to a folder with -o DIR (import "
                            "reads one set per file)")
    return "".join(render_set(ps) for ps in sets)
