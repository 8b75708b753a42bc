"""InferenceX's acceptance curves: the file header's forms (:mod:`.header`, :mod:`.forms`), the
facts a header states (:mod:`.facts`), the curve itself (:mod:`.curve`), the user's map from a
run to a registry key (:mod:`.map`), the sets built from them (:mod:`.sets`), and the reader
``registry ingest inferencex`` runs (:mod:`.read`).
"""
