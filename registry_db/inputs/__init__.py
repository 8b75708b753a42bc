"""Every input the registry accepts, checked against the spec: profile sets
(:mod:`.profile_set`), inline values and pins (:mod:`.inline`), and the runs that arrive as
library calls, batch lines (:mod:`.request`), workload and scenario files (:mod:`.run_files`),
checked once into a :class:`~.run.Run` (:mod:`.run`, from the tables of :mod:`.layers`). Each is
a table of fields; :mod:`.schema` reads any of them and holds the messages they share. Nothing
here touches a database.
"""
