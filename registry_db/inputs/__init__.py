"""Every input the registry accepts, checked against the spec: profile sets
(:mod:`.profile_set`), inline values and pins (:mod:`.inline`), and the run requests that arrive
as workload files, scenario files, batch lines or library calls (:mod:`.request`). The shared
field readers and their messages live in :mod:`.base`. Nothing here touches a database.
"""
