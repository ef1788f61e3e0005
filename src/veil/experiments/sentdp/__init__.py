"""SentDP (Meehan et al. 2022): embeddings released with epsilon-SentDP (:mod:`.embed`), utility, the paper's Fig. 4
(:mod:`.eval`), and the privacy audits: exact (:mod:`.audit`) and empirical lower bounds (:mod:`.empirical`)."""
