"""Obfuscation for private parsing (Hu et al. 2020): parser utility and word-recovery attacks at each obfuscation
level (:mod:`.parsing`)."""
