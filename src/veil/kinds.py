"""Release kinds: what a defense lets out of the owner's hands, and what an attack observes (ARCHITECTURE.md).

A defense releases exactly one kind; an attack observes exactly one kind. They meet here and nowhere else: the
bench pairs an attack with a defense when :func:`observable` says the attack can read the release.

Some releases contain another kind, and an attack of the contained kind reads them too (:data:`CONTAINS`): every
encoding of a TextHide training run is a vector, and so is every released document embedding; rewritten text is
turned into a vector by anyone who holds the public encoder. A view never reaches past what the release holds:
nothing contains ``training-encodings`` but a training run, and the exact audit (which needs the mechanism's
probabilities) observes ``document-embeddings`` itself.

A language model fine-tuned on private text is its own kind, ``generative-model``, not a ``model``: a ``model``
release is a classifier, observed through its logits on given inputs (:class:`veil.attacks.membership.observe.
ModelAccess`), while a generative model is observed through what it writes and how likely it finds a text
(:class:`veil.attacks.generation.observe.LMAccess`), and its utility is a perplexity, not an accuracy. Neither kind
contains the other.

Two attacks read their kind through another view, and say so: the exact audit is white-box (it observes the
DeepCandidate mechanism itself, :class:`veil.attacks.audit.WhiteBox`), and Algorithm 3's gradient matching one
client gradient (:class:`veil.attacks.gradients.alg3.GradientObservation`) rather than a tap of every update.

Ground module: imports nothing of veil.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ReleaseKind", "RELEASE_KINDS", "CONTAINS", "TASKS", "observable"]


@dataclass(frozen=True)
class ReleaseKind:
    """One release kind: what leaves the owner, the defense's one verb, the utility task it is measured on, and
    the type an attack of this kind observes (``"module:Class"``; empty while no attack observes the kind)."""

    name: str
    leaves: str
    verb: str
    utility: str
    observation: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "leaves": self.leaves, "verb": self.verb, "utility": self.utility,
                "observation": self.observation}


RELEASE_KINDS: dict[str, ReleaseKind] = {k.name: k for k in (
    ReleaseKind("vectors", "one vector per text at inference", "protect", "sentence classification",
                "veil.attacks.base:Observation"),
    ReleaseKind("training-encodings", "the encodings of a training run (every epoch)", "hook",
                "sentence classification", "veil.attacks.base:Observation"),
    ReleaseKind("document-embeddings", "one private embedding per document", "release_embeddings",
                "document classification", "veil.attacks.base:Observation"),
    ReleaseKind("updates", "a client's model updates per round", "hook", "federated classification",
                "veil.attacks.gradients.tap:Tap"),
    ReleaseKind("text", "rewritten text", "transform", "classification on the rewritten text",
                "veil.attacks.text.observe:ReleasedText"),
    ReleaseKind("obfuscated-text", "token-aligned substitutes (same length, same tags)", "transform",
                "dependency parsing (UAS/LAS)", "veil.attacks.word_recovery.observe:ObfuscatedText"),
    ReleaseKind("representations", "a trained encoder's hidden states r(x)", "objective",
                "the encoder's main task", "veil.attacks.attribute:AttackerSplits"),
    ReleaseKind("model", "a trained model (its outputs or weights)", "train", "classification",
                "veil.attacks.membership.observe:ModelAccess"),
    ReleaseKind("generative-model", "a causal language model fine-tuned on the private text (its samples and the "
                "likelihood it gives any text)", "train_lm", "held-out perplexity on the private domain",
                "veil.attacks.generation.observe:LMAccess"),
)}

#: release kind -> the kinds an attack may read it as (besides itself)
CONTAINS: dict[str, tuple[str, ...]] = {
    "training-encodings": ("vectors",),
    "document-embeddings": ("vectors",),
    "text": ("vectors",),
}

#: the tasks a defense serves; a corpus offers some of them (bench: which corpora a defense is planned on)
TASKS = ("sentence-classification", "document-classification", "dependency-parsing", "private-attributes",
         "language-modeling")


def observable(release: str, observes: str) -> bool:
    """Whether an attack observing ``observes`` can read a release of kind ``release``."""
    return observes == release or observes in CONTAINS.get(release, ())

