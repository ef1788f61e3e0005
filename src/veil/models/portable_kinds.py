"""The kinds of model of this layer that travel as export folders (:mod:`veil.models.transfer`): veil's masked LM,
its inverter and biaffine parsers. Each is a :class:`~veil.models.transfer.PortableKind`; the neural obfuscator's
lives with it (:mod:`veil.defenses.obfuscation.portable`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from veil.models.transfer import TransferError, check_base, fit

__all__ = ["MASKED_LM", "INVERTER", "PARSER", "parsing_models"]


def _described(description: dict[str, Any], transfer: dict[str, Any]) -> dict[str, Any]:
    """The model's manifest with the transfer recorded (its old sha256 is replaced by the new file's)."""
    return {**{k: v for k, v in description.items() if k != "sha256"}, "transfer": transfer}


class _MaskedLM:
    kind = "masked-lm"

    def cached(self) -> list[str]:
        from veil.models.mlm import MANIFEST, MLM_NAMES, mlm_dir

        return [n for n in MLM_NAMES if (mlm_dir(n) / MANIFEST).is_file()]

    def target(self, name: str) -> Path:
        from veil.models.mlm import MLM_NAMES, mlm_dir

        if name not in MLM_NAMES:
            raise TransferError(f"a masked LM named {name!r}: veil's masked LMs are {', '.join(MLM_NAMES)}")
        return mlm_dir(name)

    def source(self, name: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        from veil.models.mlm import load_mlm

        m = load_mlm(name)
        return dict(m.model.state_dict()), m.manifest, {"base": m.manifest.get("base")}

    def rebuild(self, description: dict[str, Any], state: dict[str, Any], needs: dict[str, Any]) -> Any:
        from veil.models.mlm import base_mlm

        net, tokenizer, base = base_mlm((description.get("config") or {}).get("encoder", "minilm"))
        check_base(self.kind, needs.get("base"), base)
        fit(net, state)
        net.tie_weights()
        return net.eval(), tokenizer

    def install(self, model: Any, name: str, description: dict[str, Any], transfer: dict[str, Any]) -> Path:
        from veil.models.mlm import save_mlm

        net, tokenizer = model
        return save_mlm(net, tokenizer, self.target(name), _described({**description, "name": name}, transfer))


class _Inverter:
    kind = "inverter"

    def cached(self) -> list[str]:
        from veil.models.inverter import INVERTER_NAMES, MANIFEST, inverter_dir

        return [n for n in INVERTER_NAMES if (inverter_dir(n) / MANIFEST).is_file()]

    def target(self, name: str) -> Path:
        from veil.models.inverter import INVERTER_NAMES, inverter_dir

        if name not in INVERTER_NAMES:
            raise TransferError(f"an inverter named {name!r}: veil's inverters are {', '.join(INVERTER_NAMES)}")
        return inverter_dir(name)

    def source(self, name: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        from veil.models.inverter import load_inverter

        inv = load_inverter(name)
        return dict(inv.net.state_dict()), inv.manifest, {"base": inv.manifest.get("base")}

    def rebuild(self, description: dict[str, Any], state: dict[str, Any], needs: dict[str, Any]) -> Any:
        from veil.models.inverter import build_inverter

        arch = description.get("architecture") or {}
        try:
            vector_dim, prefix = int(arch["vector_dim"]), int(arch["prefix_tokens"])
        except (KeyError, TypeError, ValueError):
            raise TransferError("the export describes no inverter architecture (vector_dim, prefix_tokens)") \
                from None
        net, tokenizer, base = build_inverter((description.get("config") or {}).get("encoder", "minilm"),
                                              vector_dim=vector_dim, prefix_tokens=prefix)
        check_base(self.kind, needs.get("base"), base)
        fit(net, state)
        return net.eval(), tokenizer

    def install(self, model: Any, name: str, description: dict[str, Any], transfer: dict[str, Any]) -> Path:
        from veil.models.inverter import save_inverter

        net, tokenizer = model
        return save_inverter(net, tokenizer, self.target(name), _described({**description, "name": name},
                                                                           transfer))


def parsing_models() -> Path:
    """Where veil keeps its parsers and neural obfuscators: ``VEIL_HOME/parsing/models``."""
    from veil._io import veil_home

    return veil_home() / "parsing" / "models"


def model_file(name: str, neural: bool) -> Path:
    """The file of the parser (``neural`` False) or neural obfuscator called ``name`` under
    :func:`parsing_models`; a name with a path in it, or of the other kind, is a TransferError."""
    if not name or any(c in name for c in "/\\\0") or name.startswith(".") or name.endswith(".state") or \
            name.startswith("neural-") != neural:
        what = "neural obfuscators are named neural-<level>-s<seed>-<key>" if neural else \
            "parsers are named like biaffine (not neural-...)"
        raise TransferError(f"{name!r} is not a name veil gives such a model here ({what})")
    return parsing_models() / f"{name}.pt"


class _Parser:
    kind = "parser"

    def cached(self) -> list[str]:
        return sorted(p.stem for p in parsing_models().glob("*.pt")
                      if not p.name.endswith(".state.pt") and not p.name.startswith("neural-"))

    def target(self, name: str) -> Path:
        return model_file(name, neural=False)

    def source(self, name: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        from veil._io import read_json
        from veil.models.biaffine import BiaffineParser

        path = self.target(name)
        parser = BiaffineParser.load(path)
        summary = read_json(path.with_suffix(".json"), what="parser summary") if path.with_suffix(".json").is_file() \
            else {}
        return dict(parser.state_dict()), {"vocab": parser.vocab.to_dict(), "config": parser.config.to_dict(),
                                           "summary": summary}, {}

    def rebuild(self, description: dict[str, Any], state: dict[str, Any], needs: dict[str, Any]) -> Any:
        from veil.models.biaffine import BiaffineParser, ParserConfig, ParserVocab

        try:
            net = BiaffineParser(ParserVocab(**description["vocab"]), ParserConfig(**description["config"]))
        except (KeyError, TypeError, ValueError):
            raise TransferError("the export does not describe a biaffine parser (vocab, config)") from None
        fit(net, state)
        return net.eval()

    def install(self, model: Any, name: str, description: dict[str, Any], transfer: dict[str, Any]) -> Path:
        from veil._io import atomic_write_json

        path = self.target(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        model.save(path)
        atomic_write_json(path.with_suffix(".json"), {**(description.get("summary") or {}), "model": str(path),
                                                      "transfer": transfer})
        return path


MASKED_LM = _MaskedLM()
INVERTER = _Inverter()
PARSER = _Parser()
