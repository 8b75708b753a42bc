"""The export side of YAML: writing values that :mod:`registry_db.yaml.load` reads back equal.

Strings that any reader (ours with YAML 1.2 scalars, or a YAML 1.1 reader such as PyYAML's
default) would take for something else are quoted; floats are written by ``repr`` (4.07, never
4.0699999); an object referenced twice is written once with an anchor and then as aliases.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping
from typing import Any

import yaml

from registry_db.yaml.load import _STD, YMap, YSeq, scalar_kind

# Plain text other readers take for a non-string: YAML 1.1's y/n booleans and YAML 1.2's 0o/0x
# integers (PyYAML's own YAML 1.1 resolver, consulted below, covers on/off, 012, 12:30, << and =).
_OTHER_READERS_RE = re.compile(r"[yYnN]|[-+]?0o[0-7]+|[-+]?0x[0-9a-fA-F]+")
# YAML 1.1 readers (libyaml among them) also break lines at CR, NEL, LS and PS, and fold such
# breaks in plain, single-quoted and block text: only double-quoted escapes keep them.
_OTHER_BREAKS_RE = re.compile("[\r\x85\u2028\u2029]")
_ANCHOR_RE = re.compile(r"[A-Za-z0-9_.-]+")


class _Dumper(yaml.SafeDumper):
    """SafeDumper that quotes ambiguous strings, writes floats by repr, and names anchors."""

    anchor_names: dict[int, str] = {}

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        # The serializer writes a string plain only when this resolves its text to str.
        if kind is yaml.ScalarNode and implicit[0]:
            ours = scalar_kind(value)
            if ours != "str":
                return _STD + ours
            if _OTHER_READERS_RE.fullmatch(value):
                return _STD + "int"
        return super().resolve(kind, value, implicit)

    def represent_float(self, data: float) -> yaml.ScalarNode:
        # PyYAML writes repr (4.07, 1.0e+16) but also .nan and .inf, which no valid value holds.
        if not math.isfinite(data):
            raise ValueError(f"cannot write {data!r}: only finite numbers are valid in a profile")
        return super().represent_float(data)

    def represent_str(self, data: str) -> yaml.ScalarNode:
        # Multi-line text reads best as a literal block; the emitter falls back to quotes when it
        # cannot be one (trailing spaces, special characters).
        style = '"' if _OTHER_BREAKS_RE.search(data) else "|" if "\n" in data else None
        return self.represent_scalar(_STD + "str", data, style=style)

    def generate_anchor(self, node: yaml.Node) -> str:
        if not hasattr(self, "_node_objects"):  # the node graph is complete once serializing
            self._node_objects = {id(n): oid for oid, n in self.represented_objects.items()}
        name = self.anchor_names.get(self._node_objects.get(id(node), -1))
        return name if name is not None else super().generate_anchor(node)


_Dumper.add_representer(float, _Dumper.represent_float)
_Dumper.add_representer(str, _Dumper.represent_str)
_Dumper.add_representer(YMap, yaml.representer.SafeRepresenter.represent_dict)
_Dumper.add_representer(YSeq, yaml.representer.SafeRepresenter.represent_list)


def dump_yaml(obj: Any, anchors: Mapping[int, str] | None = None) -> str:
    """Write ``obj`` as block YAML that :func:`load_yaml` reads back equal.

    Keys keep their order. A dict or list referenced more than once is written once with an
    anchor and then as aliases; ``anchors`` maps ``id(obj)`` to the anchor's name (others get
    PyYAML's ``id001``). Non-finite floats raise ValueError: nothing valid holds one.
    """
    names = dict(anchors or {})
    for name in names.values():
        if not _ANCHOR_RE.fullmatch(name):
            raise ValueError(f"anchor name {name!r} must be letters, digits, '_', '.' or '-'")
    out = io.StringIO()
    dumper = _Dumper(out, default_flow_style=False, sort_keys=False, allow_unicode=True,
                     width=1 << 30, indent=2)
    dumper.anchor_names = names
    try:
        dumper.open()
        dumper.represent(obj)
        dumper.close()
    finally:
        dumper.dispose()
    return out.getvalue()
