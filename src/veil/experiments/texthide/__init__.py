"""TextHide (Huang et al. 2020): utility, the paper's Table 1 and Fig. 2 (:mod:`.eval`); representation leakage,
its Tables 3 and 8 (:mod:`.retrieval`); adaptive attacks on one harness (:mod:`.attacks`)."""
