"""Federated TextHide: its utility (:mod:`.utility`), the gradients paper's Table 2 analogue (:mod:`.table2`), the
attacks on recorded runs (:mod:`.taps`) and the end-to-end chain on them (:mod:`.chain`)."""
