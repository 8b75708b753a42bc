"""The command line, stage by stage the thinnest layer: parse, call the library, render, map
errors to exit codes. :mod:`.group` is the ``registry`` group and its lazy command table,
:mod:`.output` the shared output options; each command is one module beside them.
"""

from registry_db.cli.group import main

__all__ = ["main"]
