"""The inversion attack: veil's inverter with correction by re-embedding, on any release read as vectors.

:class:`Inversion` observes ``vectors`` (a raw MiniLM release, or a document-embedding or TextHide release read as
vectors, :data:`veil.kinds.CONTAINS`): the one verb :meth:`Inversion.run` writes one text back per released
vector; :meth:`Inversion.correction` returns the whole correction curve. It is built from public resources only:
the inverter (:func:`veil.models.inverter.load_inverter`), the public encoder it was trained for and, for word
edits, veil's masked LM; it never sees an original text (scoring is :func:`veil.metrics.inversion.score_inversions`,
apart).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from veil.attacks.base import Attack, Observation, ThreatModel
from veil.attacks.inversion.correct import THREAT_MODEL

__all__ = ["Inversion"]


class Inversion(Attack):
    """Invert released vectors with ``inverter`` (a loaded :class:`~veil.models.inverter.Inverter` or its name)
    and ``steps`` correction steps (:func:`veil.attacks.inversion.correct.correct`; ``options`` go there).
    ``encoder``: the public encoder the inverter was trained for (default: built from the inverter's manifest).
    Document vectors (not unit length) are L2-normalised first: the attacker's choice, since the inverter was
    trained on unit MiniLM vectors."""

    name: ClassVar[str] = "invert"
    citation: ClassVar[str] = ("Li et al. 2023, GEIA (ACL Findings); Morris et al. 2023, Vec2Text (EMNLP), Sec. 3-4 "
                               "(correction by re-embedding, here without a trained corrector)")
    threat: ClassVar[ThreatModel] = THREAT_MODEL
    observes: ClassVar[str] = "vectors"

    bench_cell: ClassVar[str] = "veil.bench.cells.vectors:inversion_cell"
    #: correction steps in the quick and the full bench (the quick bench inverts with ``inverter-quick``)
    BENCH_STEPS: ClassVar[tuple[int, int]] = (1, 3)

    @classmethod
    def bench_applies(cls, defense: str, setting: Any) -> bool:
        """The undefended vectors and every release whose vectors are a text's own embedding (document
        embeddings; released text, embedded by the public encoder). Not TextHide's masked vectors and mixtures:
        inverting those means recovering the masks first (``veil attack invert`` does not chain it yet)."""
        from veil.defenses.base import get_defense

        return defense == "none" or get_defense(defense).releases in ("document-embeddings", "text")

    @classmethod
    def for_bench(cls, resources: Any) -> "Inversion":
        """``inverter-quick`` with 1 correction step in the quick bench, the full inverter with 3 steps otherwise
        (:func:`veil.bench.runner.run_bench` makes sure the model is there before any cell runs)."""
        quick = bool(resources.cell.config.quick)
        return cls("inverter-quick" if quick else "inverter", steps=cls.BENCH_STEPS[0 if quick else 1], beam=4)

    def __init__(self, inverter: Any = "inverter", *, encoder: Any = None, steps: int = 3, beam: int = 4,
                 **options: Any) -> None:
        from veil.models.inverter import Inverter, load_inverter
        from veil.validation import check_int

        self.inverter = inverter if isinstance(inverter, Inverter) else load_inverter(inverter)
        if encoder is None:
            from veil.encoders import TextEncoder

            encoder = TextEncoder(self.inverter.manifest["encoder"]["name"])
        self.encoder = encoder
        self.steps = check_int("steps", steps, minimum=0)
        self.beam = check_int("beam", beam, minimum=1)
        self.options = dict(options)

    def correction(self, observation: Any) -> Any:
        """The :class:`~veil.attacks.inversion.correct.Correction` of the released vectors (every step's texts,
        cosines to the released vectors and seconds)."""
        from veil.attacks.inversion.correct import correct
        from veil.validation import as_vectors

        x = as_vectors("vectors", observation.vectors if isinstance(observation, Observation) else observation)
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        x = (x / np.where(norms > 0, norms, 1.0)).astype(np.float32)
        options = dict(self.options)
        n_best = options.pop("n_best", self.beam)
        return correct(self.inverter, self.encoder, x, steps=self.steps, beam=self.beam, n_best=n_best, **options)

    def invert(self, vectors: Any) -> list[str]:
        """One text per vector (an (n, d) array or an :class:`~veil.attacks.base.Observation`): the inverter's,
        after the correction steps."""
        return self.correction(vectors).final

    def run(self, observation: Any) -> list[str]:
        """One text per released vector (:meth:`invert` of the release as it is)."""
        return self.invert(observation)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "inverter": self.inverter.identity(), "steps": self.steps, "beam": self.beam,
                "options": {k: v for k, v in self.options.items() if isinstance(v, (int, float, str, bool, tuple))}}
