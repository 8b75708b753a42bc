"""Every input the registry accepts, checked against the spec: profile sets
(:mod:`.profile_set`), inline values and pins (:mod:`.inline`), and the run requests that arrive
as workload files, scenario files, batch lines or library calls (:mod:`.request`). Each is a
table of fields; :mod:`.schema` reads any of them and holds the messages they share. Nothing
here touches a database.
"""
