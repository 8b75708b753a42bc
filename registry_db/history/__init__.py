"""Every revision of every set: what the registry held, and when.

The current registry (``profile_sets`` … ``profile_rates``) is what resolution reads; beside it
the ``revisions`` table holds one row per import that added or changed a set and per deletion,
numbered 1, 2, … per set; ``profile_versions`` holds each version of a profile once, over the
range of its set's revisions that held it (``first_revision`` … ``last_revision``, current from
``valid_from`` to ``valid_until``), with ``version_rates`` and ``version_counts`` beside it, and
``revision_caveats`` each revision's caveats (profiles cite the shared ``provenances``, which
are therefore never deleted). Revisions are written inside the importer's (or the deleter's) one
write transaction, after the writers' lock, so numbers have no gap or duplicate under concurrent
writers and a killed writer leaves no half revision. An import writes only what changed: the
profiles equal to their set's open versions extend those ranges, the others close them, and
new or changed profiles become versions (:func:`record_current`); a deletion closes every
range of its set.

Recording (:mod:`.record`), reading back (:mod:`.read`), diffing (:mod:`.diff`) and the drift of
a value with counts (:mod:`.drift`) each have a module; their public names are re-exported here.
"""

from __future__ import annotations

from registry_db.history.diff import Change, Diff, diff, diff_sets
from registry_db.history.read import (
    ACTIONS,
    Held,
    Revision,
    deleted_message,
    held,
    history,
    last_content,
    load_revision,
    origin_of,
    profiles_as_of,
)
from registry_db.history.record import (
    Deleted,
    delete_in,
    delete_sets,
    next_revisions,
    record_current,
    revision_time,
)

__all__ = ["ACTIONS", "Change", "Deleted", "Diff", "Held", "Revision", "delete_in",
           "delete_sets", "deleted_message", "diff", "diff_sets", "held", "history",
           "last_content", "load_revision", "next_revisions", "origin_of", "profiles_as_of",
           "record_current", "revision_time"]
