"""``veil encode`` and ``veil demo``: a corpus or a file encoded into vectors (veil.encoders.jobs), and the
end-to-end check that encodes a corpus and searches it (veil.encoders.demo)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from veil.cli.common import (DropEmptyOpt, EncodingOpt, ForceOpt, FormatOpt, JsonOpt, LabelOpt, TextOpt, console,
                             echo_json, file_options)

__all__ = ["register"]

_SPLITS = ("train", "dev", "test")


def encode(
    source: Annotated[str, typer.Argument(help="Corpus name or a file path (CSV, JSONL, TSV, CoNLL-U).")],
    out: Annotated[Path, typer.Option(help="Output .npy file.")],
    split: Annotated[Optional[str], typer.Option(help="train, dev or test (default: all).")] = None,
    model: Annotated[str, typer.Option(help="Encoder name or local model path.")] = "minilm",
    pooling: Annotated[str, typer.Option(help="mean or cls.")] = "mean",
    batch_size: Annotated[int, typer.Option(min=1, help="Texts per batch.")] = 64,
    max_length: Annotated[Optional[int], typer.Option(min=1, help="Truncate texts to this many tokens (with a "
                                                              "warning); default: the model's limit.")] = None,
    text: TextOpt = "text",
    label: LabelOpt = None,
    encoding: EncodingOpt = None,
    format_: FormatOpt = None,
    drop_empty: DropEmptyOpt = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read or write the embedding cache.")] = False,
    cache_embeddings: Annotated[bool, typer.Option("--cache-embeddings", help="A file's encodings also go to the "
                                                                               "cache (VEIL_HOME/embeddings) for "
                                                                               "later runs; default: only to "
                                                                               "--out.")] = False,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Encode a corpus split into a float32 .npy matrix (one row per text).

    A built-in corpus' encodings are cached under VEIL_HOME/embeddings; a file's go to --out only, unless
    --cache-embeddings.
    """
    from veil.encoders.jobs import EncodeJob, run_encode
    from veil.outputs import check_output_file

    if split is not None and split not in _SPLITS:
        raise typer.BadParameter(f"--split must be one of {', '.join(_SPLITS)} (or left out for all), got {split!r}")
    if pooling not in ("mean", "cls"):
        raise typer.BadParameter(f"--pooling must be mean or cls, got {pooling!r}")
    opts = file_options(source, text=text, label=label, encoding=encoding, format=format_, drop_empty=drop_empty)
    if cache_embeddings and (no_cache or not opts):
        raise typer.BadParameter("--cache-embeddings keeps a file's encodings in the cache: "
                                 + ("it contradicts --no-cache; give one of them" if no_cache else
                                    f"the built-in corpus {source!r} is always cached; leave it out"))
    check_output_file(out, force=force, suffixes=(".npy",))
    job = EncodeJob(source=source, out=out, split=split, model=model, pooling=pooling, batch_size=batch_size,
                    max_length=max_length, file_options=opts, cache=not no_cache, cache_embeddings=cache_embeddings)
    result = run_encode(job)
    if as_json:
        echo_json(result)
        return
    typer.echo(f"wrote {result['shape'][0]} x {result['shape'][1]} float32 to {result['out']}"
               f" in {result['seconds']:.1f} s")


def demo(
    corpus: Annotated[str, typer.Option(help="Corpus to encode.")] = "rt-polarity",
    split: Annotated[str, typer.Option(help="Split to encode.")] = "dev",
    limit: Annotated[Optional[int], typer.Option(min=2, help="Use only the first N texts of the split.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """End-to-end sanity check: encode a corpus and run nearest-neighbour retrieval on it."""
    from veil.encoders.demo import print_demo, run_demo

    if split not in _SPLITS:
        raise typer.BadParameter(f"--split must be one of {', '.join(_SPLITS)}, got {split!r}")
    result = run_demo(corpus=corpus, split=split, limit=limit)
    if as_json:
        echo_json(result)
    else:
        print_demo(result, console())


def register(app: typer.Typer) -> None:
    app.command("encode")(encode)
    app.command("demo")(demo)
