"""The nearest stored model and method, for a run refused because nothing is stored for its
model or method (a typo is the usual reason): its own small query, apart from the refusal's
"what is stored" text (:func:`registry_db.resolve.finish.say_what_exists`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from registry_db.inputs.schema import nearest
from registry_db.model import Refusal
from registry_db.model import RefusalReason as R
from registry_db.resolve.lookup import cursor

if TYPE_CHECKING:  # the command line's read-only SQLite path imports no SQLAlchemy
    from registry_db.store.engine import ReadBind

__all__ = ["METHOD_ALIASES", "NOTHING_STORED", "suggestion", "with_suggestion"]

#: Other engines' names for a method (spelt without case, ``-`` and ``_``): the names it may be
#: stored under, and why. An engine's own spelling of a stored name (``EAGLE3``, ``eagle-3``)
#: is matched without this table.
METHOD_ALIASES: dict[str, tuple[tuple[str, ...], str]] = {
    "nextn": (("mtp",), "SGLang's name for native MTP, --speculative-algorithm NEXTN"),
    "deepseekmtp": (("mtp",), "vLLM's method name for DeepSeek's native MTP"),
    "qwen3nextmtp": (("mtp",), "vLLM's method name for Qwen3-Next's native MTP"),
    "eagle1": (("eagle",), "EAGLE-1, stored as eagle"),
    "eagle2": (("eagle",), "EAGLE-2 drafts a tree with EAGLE-1's head, stored as eagle"),
}

#: What a no-profile refusal says when its scope holds nothing for the model and method
#: (:func:`registry_db.resolve.finish.say_what_exists`; a test holds the two together).
NOTHING_STORED = "nothing is stored for "


def suggestion(bind: ReadBind, model: str, method: str) -> str | None:
    """``did you mean model 'x'?`` when no profile is stored for ``model``, or ``did you mean
    method 'y'?`` when none is for ``method`` with that model, naming the nearest stored
    names; None when both are stored, or nothing stored is near. Two small queries at most,
    on the profile key's index (model, then method, lead it)."""
    with cursor(bind) as c:
        marker = "?" if c.dialect == "sqlite" else "%s"
        c.cur.execute(f"SELECT 1 FROM profiles WHERE model = {marker} LIMIT 1", (model,))
        if c.cur.fetchone() is None:
            c.cur.execute("SELECT DISTINCT model FROM profiles")
            near = nearest(model, sorted(m for (m,) in c.cur.fetchall()))
            what = "model"
        else:
            c.cur.execute(f"SELECT DISTINCT speculative_method FROM profiles WHERE model = "
                          f"{marker}", (model,))
            methods = sorted(m for (m,) in c.cur.fetchall())
            if method in methods:
                return None
            what = f"method (for {model})"
            aliased = _aliased(method, methods)
            if aliased is not None:
                return aliased
            near = nearest(method, methods)
    if not near:
        return None
    return f"did you mean {what} {' or '.join(repr(n) for n in near)}?"


def _fold(name: str) -> str:
    return name.casefold().replace("-", "").replace("_", "").replace(" ", "")


def _aliased(method: str, methods: list[str]) -> str | None:
    """``method 'x' is stored as 'y' (why)`` when ``method`` is another spelling or another
    engine's name of a stored method; None otherwise."""
    folded = _fold(method)
    same = [m for m in methods if _fold(m) == folded]
    if same:
        return f"method {method!r} is stored as {' or '.join(repr(m) for m in same)}"
    names, why = METHOD_ALIASES.get(folded, ((), ""))
    stored = [m for m in methods if _fold(m) in {_fold(n) for n in names}]
    if not stored:
        return None
    return f"method {method!r} is stored as {' or '.join(repr(m) for m in stored)} ({why})"


def with_suggestion(bind: ReadBind, model: str, method: str, refusal: Refusal) -> Refusal:
    """``refusal`` with :func:`suggestion` added when it is a no-profile one and there is a
    suggestion to make."""
    # Only when the refusal found nothing stored for the pair in scope (finish's text says
    # so): a run whose model and method are stored costs no query more.
    if refusal.reason not in (R.NO_MATCH, R.FALLBACK_NO_MATCH) or \
            NOTHING_STORED not in refusal.message:
        return refusal
    hint = suggestion(bind, model, method)
    return refusal if hint is None else Refusal(refusal.reason, f"{refusal.message}; {hint}")
