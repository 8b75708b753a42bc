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

__all__ = ["NOTHING_STORED", "suggestion", "with_suggestion"]

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
            near, what = nearest(method, methods), f"method (for {model})"
    if not near:
        return None
    return f"did you mean {what} {' or '.join(repr(n) for n in near)}?"


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
