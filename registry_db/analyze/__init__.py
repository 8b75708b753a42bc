"""Analysis of what the registry holds: the coverage grid and the acceptance curves.

:mod:`~registry_db.analyze.coverage` reads the grid from the ``profile_coverage`` view;
:mod:`~registry_db.analyze.plot` draws it with matplotlib, an optional extra imported only when
a picture is asked for.
"""
