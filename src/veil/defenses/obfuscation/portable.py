"""The neural obfuscator as a kind of model that travels as an export folder (:mod:`veil.models.transfer`).

Its description is the ``.json`` veil writes beside the weights (config, sizes, candidates, vocabulary, training
summary, fingerprint). The fingerprint hashes the exact weights, so an obfuscator brought back from float16 parts
is a new obfuscator with a new fingerprint; the old one is kept in the transfer block. Float32 parts
(``veil models export --exact``) keep every bit and the fingerprint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from veil.models.portable_kinds import model_file, parsing_models
from veil.models.transfer import TransferError, fit

__all__ = ["NEURAL_OBFUSCATOR"]


class _NeuralObfuscator:
    kind = "neural-obfuscator"

    def cached(self) -> list[str]:
        return sorted(p.stem for p in parsing_models().glob("neural-*.pt") if not p.name.endswith(".state.pt"))

    def target(self, name: str) -> Path:
        return model_file(name, neural=True)

    def source(self, name: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        from veil._io import read_json
        from veil.defenses.obfuscation.neural import NeuralObfuscator

        path = self.target(name)
        ob = NeuralObfuscator.load(path)  # its fingerprint checked
        return dict(ob.network.state_dict()), read_json(path.with_suffix(".json")), {}

    def rebuild(self, description: dict[str, Any], state: dict[str, Any], needs: dict[str, Any]) -> Any:
        from veil.defenses.obfuscation.neural import ObfuscatorConfig, ObfuscatorNet
        from veil.models.biaffine import ParserVocab

        try:
            net = ObfuscatorNet(ParserVocab(**description["vocab"]), description["sizes"], description["candidates"],
                                ObfuscatorConfig(**description["config"]))
        except (KeyError, TypeError, ValueError):
            raise TransferError("the export does not describe a neural obfuscator (vocab, sizes, candidates, "
                                "config)") from None
        fit(net, state)
        return net.eval()

    def install(self, model: Any, name: str, description: dict[str, Any], transfer: dict[str, Any]) -> Path:
        from veil.defenses.obfuscation.neural import NeuralObfuscator

        path = self.target(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        summary = {**(description.get("summary") or {}),
                   "transfer": {**transfer, "fingerprint_before": description.get("fingerprint")}}
        NeuralObfuscator(network=model, summary=summary).save(path)
        return path


NEURAL_OBFUSCATOR = _NeuralObfuscator()
