"""veil's own masked language model: all-MiniLM-L6-v2's BERT weights with a trained masked-LM head.

No registry package ships pretrained masked-LM weights (RESOURCES.md): ``BertForMaskedLM`` loaded from the shipped
MiniLM folder has a freshly initialised MLM transform (dense + GELU + LayerNorm) and decoder bias, with the
decoder tied to the word embeddings. ``veil models train mlm`` (:mod:`veil.training.mlm`) continues masked-LM
training of the whole model from there on public text, and saves it here:

    VEIL_HOME/models/<name>/        name "mlm" (the full model) or "mlm-quick" (tests, the quick bench)
        model.safetensors config.json tokenizer files   (transformers' save_pretrained)
        manifest.json                                   what it was trained on, how long, held-out accuracy,
                                                        its learning curve and the sha256 of model.safetensors
        .veil-owned                                     veil wrote the folder (only such a folder is replaced)

:func:`load_mlm` checks the weights' sha256 against the manifest before use (:func:`weights_problem`), and a
file that still does not load is a typed error too: a damaged or foreign folder is a
:class:`~veil.errors.CacheCorruptError` naming the command that rebuilds it, never a traceback.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veil.errors import CacheCorruptError, InvalidParameterError, ResourceMissingError

__all__ = ["MLM_NAMES", "MaskedLM", "mlm_dir", "load_mlm", "base_mlm", "save_mlm", "check_replaceable", "read_manifest",
           "train_command", "weights_problem"]

#: the models ``veil models train mlm`` makes: the full one and ``--quick``
MLM_NAMES = ("mlm", "mlm-quick")
WEIGHTS = "model.safetensors"
MANIFEST = "manifest.json"


def train_command(name: str) -> str:
    """The command that (re)builds the model ``name``."""
    return "veil models train mlm --quick --force" if name == "mlm-quick" else "veil models train mlm --force"


def mlm_dir(name: str = "mlm") -> Path:
    """Where the masked LM ``name`` lives: ``VEIL_HOME/models/<name>``."""
    from veil._io import veil_home

    if name not in MLM_NAMES:
        raise InvalidParameterError(f"unknown masked LM {name!r}; veil makes {', '.join(MLM_NAMES)}")
    return veil_home() / "models" / name


@dataclass
class MaskedLM:
    """A loaded masked LM: the ``BertForMaskedLM``, its tokenizer, its manifest and where it came from."""

    model: Any
    tokenizer: Any
    manifest: dict[str, Any]
    folder: Path

    @property
    def mask_id(self) -> int:
        return int(self.tokenizer.mask_token_id)

    @property
    def max_length(self) -> int:
        return int(min(self.tokenizer.model_max_length, self.model.config.max_position_embeddings))

    def hidden(self, seqs: list[list[int]]) -> Any:
        """The last hidden states (batch, width, dim) of token-id sequences, right-padded into one batch, the
        encoder run under bf16 autocast where bf16 is native (:mod:`veil._bf16`; the MLM head is applied by the caller, in fp32, where it needs it)."""
        import torch

        width = max(map(len, seqs))
        ids = torch.full((len(seqs), width), int(self.tokenizer.pad_token_id), dtype=torch.long)
        att = torch.zeros((len(seqs), width), dtype=torch.long)
        for r, q in enumerate(seqs):
            ids[r, :len(q)] = torch.as_tensor(q)
            att[r, :len(q)] = 1
        from veil._bf16 import autocast

        with autocast("cpu"):
            return self.model.bert(input_ids=ids, attention_mask=att).last_hidden_state

    def identity(self) -> dict[str, Any]:
        """What a record says about the model it used (name, sha256, training data, held-out accuracy, and how its
        training stopped)."""
        m = self.manifest
        return {"name": m.get("name"), "sha256": m.get("sha256"), "treebank": m.get("treebank"),
                "treebank_sha256": m.get("treebank_sha256"), "steps": m.get("steps"),
                "heldout_accuracy": (m.get("heldout") or {}).get("accuracy"),
                # "budget": cut short by its minute cap (a weaker model than its configuration asks for)
                "stopped": m.get("stopped"), "planned_steps": m.get("planned_steps")}


def _quiet_load(loader: Any, folder: Path) -> Any:
    """``loader.from_pretrained(folder)`` offline, without transformers' progress bar and load report."""
    from transformers.utils import logging as hf_logging

    bars, level = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        return loader.from_pretrained(folder, local_files_only=True)
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def base_mlm(encoder: str = "minilm") -> tuple[Any, Any, str]:
    """``(BertForMaskedLM, tokenizer, model id)`` from the shipped encoder's weights: the encoder and the tied
    decoder come from MiniLM; the MLM transform and the decoder bias start fresh (RESOURCES.md)."""
    from transformers import AutoTokenizer, BertForMaskedLM

    from veil.encoders.registry import resolve_model

    resolved = resolve_model(encoder)
    model = _quiet_load(BertForMaskedLM, resolved.folder)
    tokenizer = _quiet_load(AutoTokenizer, resolved.folder)
    return model, tokenizer, resolved.model_id


#: what training the quick model (:data:`veil.training.mlm.QUICK_MLM`) takes from scratch on 2 idle cores of the
#: target machine, in minutes (6.17 measured by benchmarks/quick_models.py on 2026-12-06: 231 steps; a busy machine
#: takes longer for the same weights): the estimate every message prints before it trains the quick model
QUICK_MLM_MINUTES = 6


def missing_error(folder: Path, name: str) -> ResourceMissingError:
    """The typed error for a masked LM that is not there, naming every way to get it."""
    fix = train_command(name).removesuffix(" --force")
    if name == "mlm-quick":
        how = f"train it with `{fix}` (about {QUICK_MLM_MINUTES} minutes on 2 idle cores)"
    else:
        how = (f"train it with `{fix}` (about 40 minutes on 2 cores, after `veil parse treebank`), or on a GPU "
               "machine with deploy/gpu/train.py (pack mlm, train, unpack), or use the small model instead "
               "(--mlm mlm-quick, trained by `veil models train mlm --quick`)")
    return ResourceMissingError(f"the masked LM {folder}", fix,
                                message=f"veil's masked LM {folder} does not exist (or is incomplete); {how}")


def read_manifest(folder: str | os.PathLike, name: str = "mlm") -> dict[str, Any]:
    from veil._io import read_json

    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise missing_error(Path(folder), name if name in MLM_NAMES else "mlm")
    manifest = read_json(path, what="masked-LM manifest", fix=f"run `{train_command(name)}` to rebuild it")
    if not isinstance(manifest, dict) or "sha256" not in manifest:
        raise CacheCorruptError(f"the masked LM {folder}", "its manifest.json names no sha256", train_command(name))
    return manifest


def weights_problem(folder: str | os.PathLike, manifest: dict[str, Any]) -> str | None:
    """None when ``folder``'s weights have the sha256 its ``manifest`` recorded; otherwise what is wrong with them
    (:func:`veil.models.files.file_problem`: missing, or their size and digest)."""
    from veil.models.files import file_problem

    return file_problem(Path(folder) / WEIGHTS, sha256=manifest.get("sha256"))


def load_mlm(name: str | os.PathLike = "mlm") -> MaskedLM:
    """The masked LM ``name`` (``mlm`` or ``mlm-quick`` under VEIL_HOME, or a folder ``train_mlm`` wrote),
    in eval mode, after its weights' sha256 matched its manifest."""
    from transformers import AutoTokenizer, BertForMaskedLM

    label = str(name)
    folder = mlm_dir(label) if label in MLM_NAMES else Path(name)
    fix = train_command(label if label in MLM_NAMES else "mlm")
    if not (folder / WEIGHTS).is_file() or not (folder / MANIFEST).is_file():
        raise missing_error(folder, label if label in MLM_NAMES else "mlm")
    manifest = read_manifest(folder, label if label in MLM_NAMES else "mlm")
    problem = weights_problem(folder, manifest)
    if problem is not None:
        raise CacheCorruptError(f"the masked LM {folder}", problem, fix)
    try:
        model = _quiet_load(BertForMaskedLM, folder)
        tokenizer = _quiet_load(AutoTokenizer, folder)
    except Exception as exc:  # noqa: BLE001  a damaged config.json or tokenizer file: transformers' many errors
        reason = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
        raise CacheCorruptError(f"the masked LM {folder}", f"its files do not load ({type(exc).__name__}: "
                                f"{reason})", fix) from None
    model.eval()
    return MaskedLM(model, tokenizer, manifest, folder)


def check_replaceable(folder: str | os.PathLike) -> None:
    """Raise :class:`~veil.errors.NotOwnedError` when ``folder`` exists and veil did not write it (called before
    any training, so no work is spent on a model that could not be saved)."""
    from veil._io import is_owned
    from veil.errors import NotOwnedError

    folder = Path(folder)
    if (folder.exists() or folder.is_symlink()) and (folder.is_symlink() or not is_owned(folder)):
        raise NotOwnedError(f"{folder} exists and veil did not write it (no .veil-owned marker), so it will not be "
                            "replaced; move it away yourself, or set VEIL_HOME to another folder")


def save_mlm(model: Any, tokenizer: Any, folder: str | os.PathLike, manifest: dict[str, Any]) -> Path:
    """Write the model, its tokenizer and ``manifest`` (plus the weights' sha256) to ``folder``.

    The files are written to a new sibling folder first and swapped in at the end, so a reader never sees a
    half-written model; an existing ``folder`` is replaced only if veil wrote it (its ``.veil-owned`` marker)."""
    from transformers.utils import logging as hf_logging

    from veil._io import atomic_write_json, publish_owned_dir, sha256_file

    folder = Path(folder)
    check_replaceable(folder)

    def fill(tmp: Path) -> None:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        atomic_write_json(tmp / MANIFEST, {**manifest, "sha256": sha256_file(tmp / WEIGHTS)})

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        publish_owned_dir(folder, fill, f"veil's masked LM ({manifest.get('name')}, veil models train mlm)")
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    return folder
