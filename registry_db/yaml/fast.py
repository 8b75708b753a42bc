"""The rapid first pass: ``ryaml`` 0.5.1 reads a file whose bytes prove it reads it our way.

``ryaml`` 0.5.1 (MIT) is serde_yaml 0.9.34 over unsafe-libyaml, a translation of libyaml to
Rust: it tokenizes and parses exactly as the libyaml under PyYAML does, and builds the values in
Rust (guard included, 0.72x the CPU of :mod:`registry_db.yaml.plain`, which builds them from
libyaml's events in Python, on the benchmark's files without anchors). Where serde_yaml's
reading differs from the loader's (docs/decisions.md), a byte guard (:func:`agrees`) sends the
file the long way before ``ryaml`` sees it:

- a tag (``!``): serde_yaml keeps unknown tags as ``{'!tag': value}``;
- ``0x1F``, ``0o17``, ``0b101`` are integers to serde_yaml, text to us;
- a run of 39 digits: past 128 bits (2**128 has 39) serde_yaml reads a float, we an integer;
- an exponent of three digits: ``1e400`` is text to serde_yaml, infinity to us;
- a key that Python may find equal to another key of its mapping while serde_yaml does not
  (``1`` and ``1.0``, ``1`` and ``true``): a key ending in a digit or a dot, an explicit ``?``
  key, a flow-mapping entry with no value;
- nesting that may pass 100 levels (serde_yaml allows 128): a flow collection in another, or a
  line indented past 38 columns;
- an alias (any ``*``): serde_yaml copies the node for each alias and bounds the copies by jumps,
  not by nodes as the loader does; copying made ryaml no faster than libyaml's events on the
  benchmark's files with anchors (0.97x), where the loader's one shared value also lets the
  checks see a provenance once.

Anything else serde_yaml refuses (two documents, a duplicate key, a syntax error, an integer
past 64 bits, a key that is a list) raises, and the caller reads the file the long way.
``tests/unit/test_rapid_load.py`` holds a document for each rule and compares this pass with
the loader on the YAML test suite, dumped and mutated documents (hypothesis) and the corpus.

Without ``ryaml`` 0.5.1 installed (the ``fast`` extra), :func:`load_rapid` always answers None.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any

from registry_db.yaml import load as _loader

__all__ = ["RAPID", "agrees", "load_rapid", "risk"]

#: Use ``ryaml`` when it is installed; tests switch it off to compare the other passes.
RAPID = True

#: The release whose reading the guard was proven against (ryaml 0.6 replaces serde_yaml).
_VERSION = "0.5.1"


@functools.lru_cache(maxsize=1)
def _ryaml_loads() -> Any:
    """``ryaml.loads`` of ryaml 0.5.1, or None (not installed, or another release)."""
    try:
        import ryaml
    except ImportError:
        return None
    # The dist-info beside the package names the release (importlib.metadata costs 0.1 s).
    site = os.path.dirname(os.path.dirname(os.path.abspath(ryaml.__file__)))
    if not os.path.isdir(os.path.join(site, f"ryaml-{_VERSION}.dist-info")):
        return None
    return ryaml.loads


def _classes() -> bytes:
    """The byte classes the guard's needles are written in (see :func:`agrees`)."""
    table = bytearray(range(256))
    # Digits, the dot, signs and blanks are one class: runs of it are numbers or indentation.
    for c in b"0123456789.+- \t":
        table[c] = ord("0")
    for c in b"eE":
        table[c] = ord("e")
    return bytes(table)


_CLASSES = _classes()
#: Only flow indicators, separators, quotes and comment marks survive (``{a: 1, b}``: ``{:,}``).
_NOT_FLOW = bytes(c for c in range(256) if c not in b"[]{},:\"'#")
#: In those: a flow collection inside another; inside one, a comment or a quote that does not
#: close at once (a quoted string holding an indicator, which is text there); a flow-mapping
#: entry with no ``:`` (a key whose value is empty).
_FLOW_RISK = re.compile(rb"(?P<flow_nested>[\[{][^\]}\[{]*[\[{])"
                        rb"|(?P<flow_text>[\[{](?:[^\]}\"'#]|\"\"|'')*+[\"'#])"
                        rb"|(?P<flow_empty_entry>\{,|\{[^{}\[\]]*,(?=[,}]))")
#: A tag: ``!`` not after a letter or digit (``Wow!`` is text).
_TAG = re.compile(rb"!(?<!\w!)")
#: An explicit key: ``?`` not after a letter or digit, then a blank, a flow indicator or the end.
_EXPLICIT_KEY = re.compile(rb"\?(?<!\w\?)(?=[\s,\[\]{}]|\Z)")
#: ``0x``, ``0o``, ``0b`` where a scalar may start (not after a letter, digit or dot); the
#: literal ``0`` first keeps the scan fast.
_RADIX = re.compile(rb"0(?<![\w.]0)[xob]")
#: In class bytes: 39 digits or blanks (a number past 128 bits, a line indented past 38
#: columns), a digit, dot or blank before ``:`` (a key that may be a number), an exponent.
_NEEDLES = (("long_run", b"0" * 39), ("number_key", b"0:"), ("exponent", b"0e000"))


def risk(data: bytes) -> str | None:
    """The first reason ``ryaml`` 0.5.1 might read ``data`` otherwise than the loader, or None.

    None is proven by the checks below, whose byte patterns are supersets of what they guard
    (see the module's docstring); any reason sends the file the long way, which is always safe.
    The rare bytes are looked for first (``in`` on one byte is a memchr), the rest in two
    translations of the file.
    """
    if b"!" in data and _TAG.search(data):
        return "tag"
    if b"?" in data and _EXPLICIT_KEY.search(data):
        return "explicit_key"
    if b"*" in data:
        return "alias"
    if _RADIX.search(data):
        return "radix"
    classes = data.translate(_CLASSES)
    for name, needle in _NEEDLES:
        if needle in classes:
            return name
    found = _FLOW_RISK.search(data.translate(None, _NOT_FLOW))
    return found.lastgroup if found else None


def agrees(data: bytes) -> bool:
    """Whether the byte guard lets ``ryaml`` read ``data`` (:func:`risk` found nothing)."""
    return risk(data) is None


def load_rapid(data: bytes) -> Any:
    """The plain value of the YAML file ``data`` read by ``ryaml``, or None: read it otherwise.

    None also for a file whose document is null (the checks refuse it; the long way says why).
    """
    loads = _ryaml_loads() if RAPID else None
    if loads is None or len(data) > _loader.MAX_FILE_BYTES or not agrees(data):
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    try:
        value = loads(text[1:] if text.startswith("\ufeff") else text)
    except Exception:  # any refusal of ryaml's is "the long way"
        return None
    except BaseException as exc:  # a Rust panic (pyo3's PanicException) too, nothing else
        if type(exc).__name__ != "PanicException":
            raise
        return None
    return value
