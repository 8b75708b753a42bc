"""How files become rows, and rows files again: collecting and checking the files of an import
(:mod:`.write`), skipping files unchanged since the last import (:mod:`.unchanged`), restoring a
set from its history as a new revision (:mod:`.restore`), and exporting sets as YAML that
imports back to the same rows (:mod:`.export`).
"""
