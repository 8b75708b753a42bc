"""The store's messages that the SQLAlchemy-free read paths give too (a resolution refused for
an unknown set), in a module that imports no SQLAlchemy."""

from __future__ import annotations

from collections.abc import Sequence

from registry_db.inputs.schema import nearest

__all__ = ["unknown_set_message"]


def unknown_set_message(name: str, known: Sequence[str]) -> str:
    """"No set NAME", with the nearest known names and the full list (or how to add sets)."""
    if not known:
        return (f"no profile set named {name!r}: the database holds no sets yet; "
                "add some with `registry import PATH`")
    near = nearest(name, known)
    hint = f"did you mean {' or '.join(repr(n) for n in near)}? " if near else ""
    shown = ", ".join(known[:20]) + (f", … ({len(known)} in all)" if len(known) > 20 else "")
    return f"no profile set named {name!r}; {hint}known sets: {shown}"
