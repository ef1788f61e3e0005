"""Embedding inversion: the text written back from a released vector (GEIA, Li et al. 2023; Vec2Text, Morris et al.
2023), with no index of the private text.

``baselines``: the nearest public sentence and a bag-of-words predictor, the references every inversion number is
set against; ``correct``: correction by re-embedding (hypotheses re-embedded with the public encoder and edited
toward the target vector, word edits ranked by the inverter itself by default); ``invert``: the attack (the
inverter with correction). The inverter itself is :mod:`veil.models.inverter`.
"""
