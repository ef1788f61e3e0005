"""Adversarial training against attribute inference (Coavoux et al. 2018): one run per (corpus, encoder, defense,
width, seed) and every attacker on it (:mod:`.attributes`)."""
