"""The command line, stage by stage the thinnest layer: parse, call the library, render, map
errors to exit codes. :mod:`.group` is the ``registry`` group and its lazy command table,
:mod:`.output` the shared output options; each command is one module beside them.

:func:`run` is the ``registry`` program: ``db upgrade`` with nothing to do is answered before
click is imported (:mod:`.fast`); everything else is :data:`main`, the click group, loaded on
first use so that importing this package costs nothing.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from registry_db.cli.group import main as main

__all__ = ["main", "run"]


def run() -> None:
    """The ``registry`` console script."""
    if "upgrade" in sys.argv[1:]:
        from registry_db.cli.fast import upgrade_at_head

        if upgrade_at_head(sys.argv[1:]):
            sys.exit(0)
    from registry_db.cli.group import main

    main()


def __getattr__(name: str) -> Any:
    if name == "main":
        from registry_db.cli.group import main

        return main
    raise AttributeError(f"module 'registry_db.cli' has no attribute {name!r}")
