"""The profile-set source: ``*.yaml``/``*.yml`` files and folders of them, as the spec writes them.

This is the registry's own format, so reading is loading each file with positions
(:mod:`registry_db.yaml.load`) and checking it (:mod:`registry_db.inputs.profile_set`), plus the
rules that span files: two files may not declare one set, and two sets should not hold one
profile key (the resolver refuses it: a warning, an error under ``validate --strict``).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from registry_db.errors import Finding, InvalidInput, cap_findings, sort_findings
from registry_db.inputs.profile_set import YAML_SUFFIXES, check_profile_set
from registry_db.model import ProfileSet, profile_label
from registry_db.yaml.load import UNKNOWN, load_file, load_yaml, mark, pos, read_file_bytes

NAME = "profile-set"
DESCRIPTION = "AcceptanceProfileSet YAML files, or folders of them"


def read(paths: Iterable[str | os.PathLike], *,
         progress: Callable[[str, int, int], None] | None = None,
         **_: Any) -> tuple[list[ProfileSet], list[Finding]]:
    """The source protocol's entry point: :func:`check_paths`."""
    return check_paths(paths, progress)



def _kind(path: Path) -> str:
    """What a folder entry that is not a regular file is, as a message names it."""
    try:
        mode = path.lstat().st_mode
    except OSError as exc:
        return f"it cannot be examined ({exc.strerror or exc})"
    for test, what in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a folder")):
        if test(mode):
            return what
    return "not a file"


def _skipped_subfolders(folder: Path) -> list[Finding]:
    """A warning for each visible subfolder of ``folder`` with YAML files in it: folders are
    read one level deep, so those files are not imported unless named."""
    out = []
    try:
        subs = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []  # the caller reports an unreadable folder
    for sub in subs:
        try:
            count = sum(1 for p in sub.rglob("*") if p.suffix in YAML_SUFFIXES and not any(
                part.startswith(".") for part in p.relative_to(sub).parts))
        except OSError:
            continue
        if count:
            out.append(Finding(str(sub), 0, 0, "", "skipped_subfolder",
                               f"subfolder with {count} YAML file(s) skipped: folders are read "
                               "one level deep, not recursively; add -r, or pass it as a PATH "
                               "of its own, to read them",
                               severity="warning"))
    return out


def _tree(folder: Path) -> list[Path]:
    """Every ``*.yaml``/``*.yml`` entry under ``folder``, hidden files and folders skipped,
    sorted by path; links to folders are not followed (a loop would never end)."""
    out: list[Path] = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        out.extend(Path(root) / n for n in names
                   if not n.startswith(".") and Path(n).suffix in YAML_SUFFIXES)
    return sorted(out)


def collect_files(paths: Iterable[str | os.PathLike],
                  findings: list[Finding] | None = None, *,
                  recursive: bool = False) -> list[Path]:
    """The files named by ``paths``: files as given, folders' ``*.yaml``/``*.yml`` (sorted).

    Folders are read one level deep (every level with ``recursive``) and their hidden files
    and folders skipped; one level deep, a subfolder that holds YAML files is reported
    skipped (``skipped_subfolder``, a warning). A path that does not
    exist (``no_such_file``), a folder that cannot be read (``unreadable_folder``), a folder
    without YAML files (``no_yaml_files``, an error, since the user surely meant some) and a
    ``*.yaml`` link that leads nowhere (``broken_link``, a warning: it is skipped) are
    findings: appended to ``findings`` when given, else raised as :class:`InvalidInput` when
    any is an error. A file named twice is returned once.
    """
    problems: list[Finding] = []
    out: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        label = str(raw)
        try:
            is_dir, exists = path.is_dir(), path.exists()
        except OSError as exc:  # a name too long, a folder on the way that cannot be searched
            problems.append(Finding(label, 0, 0, "", "unreadable_file",
                                    f"cannot read it: {exc.strerror or exc}"))
            continue
        if is_dir:
            try:
                entries = _tree(path) if recursive else sorted(
                    p for p in path.iterdir() if p.suffix in YAML_SUFFIXES
                    and not p.name.startswith("."))
                if not os.access(path, os.R_OK):  # os.walk skips what it cannot read
                    raise PermissionError(13, "Permission denied")
            except OSError as exc:
                problems.append(Finding(label, 0, 0, "", "unreadable_folder",
                                        f"cannot read the folder: {exc.strerror or exc}"))
                continue
            found = [p for p in entries if p.is_file()]
            skipped = [] if recursive else _skipped_subfolders(path)
            problems.extend(skipped)
            said = {f.file for f in skipped}
            for p in entries:
                if p.is_symlink() and not p.is_file():
                    # is_file() is False for a dangling or looping link: say why it is skipped.
                    problems.append(Finding(str(p), 0, 0, "", "broken_link",
                                            "the link leads to no file (dangling or looping); "
                                            "skipped", severity="warning"))
                elif not p.is_file() and str(p) not in said:
                    # Never opened: reading a FIFO would wait for a writer that never comes.
                    problems.append(Finding(str(p), 0, 0, "", "not_a_file",
                                            f"{_kind(p)}, not a regular file; skipped",
                                            severity="warning"))
            if not found:
                problems.append(Finding(label, 0, 0, "", "no_yaml_files",
                                        "the folder holds no *.yaml or *.yml file" + (
                                            "" if recursive else " (add -r to read its "
                                            "subfolders)")))
        elif exists:
            found = [path]
        else:
            problems.append(Finding(label, 0, 0, "", "no_such_file",
                                    "no such file or folder; check the path"))
            found = []
        for p in found:
            if p.resolve() not in seen:
                seen.add(p.resolve())
                out.append(p)
    if findings is not None:
        findings.extend(problems)
    elif any(f.is_error for f in problems):
        # Warnings alone (a skipped subfolder or link) do not stop a caller that asked for files.
        raise InvalidInput(problems)
    return out


#: Read each file first without positions (:mod:`registry_db.yaml.plain`), keeping the
#: positional loader for files that have anything to report. Tests switch it off to prove that
#: both ways give the same sets and findings.
FAST_PATH = True


def _fast(data: bytes, file: str) -> tuple[Any, ProfileSet] | None:
    """The document and set of a file that loads and checks without a single finding, or None."""
    from registry_db.yaml.plain import load_plain_bytes

    doc = load_plain_bytes(data)
    if not isinstance(doc, dict):
        return None
    profile_set, problems = check_profile_set(doc, file)
    if problems or profile_set is None:
        return None  # every finding carries a position: the long way says it
    return doc, profile_set


def check_paths(paths: Iterable[str | os.PathLike],
                progress: Callable[[str, int, int], None] | None = None,
                read_hashes: dict[str, str] | None = None, *,
                recursive: bool = False, keep: Callable[[ProfileSet], Any] | None = None,
                ) -> tuple[list[Any], list[Finding]]:
    """Load and check every file under ``paths``, and the rule that set names are unique.

    Returns every valid set and every finding (sorted; at most
    :data:`registry_db.errors.MAX_FINDINGS_PER_FILE` a file, then a count of the rest); the
    caller writes nothing when any finding is an error. File names in findings are the paths
    as given. ``progress("validate", done, total)`` is called after each file. Each file's
    bytes are read once; ``read_hashes`` (when given) gets ``file -> SHA-256`` of exactly the
    bytes that were parsed. With ``keep``, the list holds ``keep(set)`` of each set as it is
    read, not the set (an importer keeps a compact form: memory bounded by the largest file).
    """
    findings: list[Finding] = []
    sets: list[Any] = []
    declared: dict[str, tuple[str, Path]] = {}
    files = collect_files(paths, findings, recursive=recursive)
    for done, path in enumerate(files):
        if progress is not None:  # here, not at the end: the body may `continue`
            progress("validate", done, len(files))
        file = str(path)
        profile_set: ProfileSet | None
        try:
            data = read_file_bytes(path, file)
        except InvalidInput as exc:
            findings.extend(exc.findings)
            continue
        if read_hashes is not None:
            read_hashes[file] = hashlib.sha256(data).hexdigest()
        fast = _fast(data, file) if FAST_PATH else None
        if fast is not None:
            doc, profile_set = fast
        else:
            load_failed = False
            try:
                doc = load_yaml(data, file)
            except InvalidInput as exc:
                findings.extend(exc.findings)
                doc = getattr(exc, "document", None)
                if doc is None:
                    continue
                load_failed = True  # still checked, so every problem shows; never imported
            profile_set, problems = check_profile_set(doc, file)
            findings.extend(problems)
            if load_failed:
                profile_set = None
        name = doc.get("name") if isinstance(doc, dict) else None
        if isinstance(name, str) and name.strip():
            if name in declared:
                other, other_path = declared[name]
                line_col = _name_pos(doc, path, file)
                findings.append(Finding(file, line_col[0], line_col[1], "name",
                                        "duplicate_set_name",
                                        f"set {name!r} is declared by both {other} (line "
                                        f"{_name_pos(None, other_path, other)[0]}) "
                                        f"and {file}; give each set its own name"))
            else:
                declared[name] = (file, path)
        if profile_set is not None:
            sets.append(profile_set if keep is None else keep(profile_set))
    if progress is not None and files:
        progress("validate", len(files), len(files))
    return sets, cap_findings(sort_findings(findings))


def _name_pos(doc: Any, path: Path, file: str) -> tuple[int, int]:
    """Where ``name`` is written in the file; a document read without positions is re-read
    (only for a duplicate set name, a rare finding)."""
    if doc is None or mark(doc) == UNKNOWN:
        try:
            doc = load_file(path, file)
        except InvalidInput as exc:
            doc = getattr(exc, "document", None)
    return pos(doc, "name")


def shared_keys(sets: Sequence[ProfileSet], severity: str = "warning") -> list[Finding]:
    """``shared_profile_key``: each profile of a set whose key an earlier set (in file order)
    holds too, at the profile's line; the resolver refuses such a key while both sets count.
    Positions are read again only for the files that hold one (a rare finding)."""
    first: dict[tuple, ProfileSet] = {}
    found: dict[str, list[tuple[int, tuple, ProfileSet]]] = defaultdict(list)
    for s in sets:
        for i, prof in enumerate(s.profiles):
            other = first.setdefault(prof.key, s)
            if other is not s:
                found[s.file or ""].append((i, prof.key, other))
    out = []
    for file, shared in found.items():
        try:
            doc = load_file(file)
        except InvalidInput:
            doc = None
        items = doc.get("profiles") if isinstance(doc, dict) else None
        for i, key, other in shared:
            line, col = pos(items, i) if items is not None else (0, 0)
            out.append(Finding(
                file, line, col, f"profiles[{i}]", "shared_profile_key",
                f"profile {profile_label(*key)} is also held by set {other.name!r} "
                f"({other.file}); the resolver refuses a key two sets hold, so keep it in one "
                "set", severity=severity))
    return out


def _is_file(path: Path) -> bool:
    """Whether ``path`` names a file (one that cannot be examined is collect_files' to report)."""
    try:
        return path.is_file()
    except OSError:
        return False


def validate_paths(paths: Sequence[str | os.PathLike], *, recursive: bool = False,
                   strict: bool = False) -> tuple[list[ProfileSet], list[Finding]]:
    """``registry validate``: :func:`check_paths`, and with ``strict`` the profile keys two
    sets share as errors (``import`` warns of them; ``conflicts --check`` fails on them once
    imported). ``strict`` also reads the other files of each given file's folder for context
    (a pre-commit hook passes only the changed files): a set name or profile key a changed
    file shares with an unchanged one is reported at the changed file, the unchanged files'
    own problems are not.
    """
    context: dict[Path, None] = {}
    if strict:
        files = [Path(p) for p in paths if _is_file(Path(p))]
        given = {p.resolve() for p in files}
        for folder in dict.fromkeys(p.parent for p in files):
            context.update((p, None) for p in collect_files([folder], [])
                           if p.resolve() not in given)
    # Context first: a clash between a given file and its folder lands on the given file.
    sets, findings = check_paths([*context, *paths], recursive=recursive)
    if strict:
        findings = sort_findings([*findings, *cap_findings(shared_keys(sets, "error"))])
    if context:
        unchanged = {str(p) for p in context}
        findings = [f for f in findings if f.file not in unchanged]
        sets = [s for s in sets if s.file not in unchanged]
    return sets, findings
