"""TextHide (Huang, Song, Chen, Li, Arora; Findings of EMNLP 2020): the mechanism, its secret mask pools and mixing.

* :mod:`.mechanism`: :class:`TextHide` (Alg. 1 encryption, inference masking, the guarantee statement);
* :mod:`.masks`: :class:`MaskPool`, the secret key (OS CSPRNG, 0o600 files);
* :mod:`.mix`: the one-time mixing randomness and the vectorised mixing of representations and labels.
"""

from veil.defenses.texthide.masks import MaskPool
from veil.defenses.texthide.mechanism import TEXTHIDE_GUARANTEE, Encrypted, TextHide
from veil.defenses.texthide.mix import TextHideDetails

__all__ = ["TextHide", "Encrypted", "MaskPool", "TextHideDetails", "TEXTHIDE_GUARANTEE"]
