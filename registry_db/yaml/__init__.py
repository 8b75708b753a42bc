"""YAML in and out: :mod:`.load` reads one document with positions, YAML 1.2 scalars, duplicate
keys refused and a bounded alias expansion; :mod:`.dump` writes values that read back equal.
"""
