"""``veil obfuscate``: sentences obfuscated on this machine (Hu et al. 2020; veil.parsing.obfuscate_file), and the
obfuscation options and checks it shares with ``veil parse client`` and ``veil attack word-recovery``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from veil.cli.common import ForceOpt, JsonOpt, echo_json

__all__ = ["register", "LevelOpt", "TreebankOpt", "MethodOpt", "NeuralModelOpt", "check_level", "check_treebank",
           "check_method", "needs_silver"]

TreebankOpt = Annotated[str, typer.Option(help="silver-sm (built by `veil parse treebank`) or a folder with "
                                               "train/dev/test.conllu (Penn tags in XPOS).")]
LevelOpt = Annotated[str, typer.Option(help="Obfuscation level: P1..P5 (cumulative, Hu et al. Table 1).")]
MethodOpt = Annotated[str, typer.Option(help="random (same-POS substitution) or neural (a trained neural "
                                            "obfuscator: --neural-model).")]
NeuralModelOpt = Annotated[Optional[Path], typer.Option(help="The neural obfuscator's .pt file (written by `veil "
                                                            "parse obfuscator train`); --method neural only.")]


def check_level(level: str, allow_none: bool = False) -> str:
    from veil.experiments.obfuscation.parsing import LEVELS

    valid = LEVELS if allow_none else LEVELS[1:]
    if level not in valid:
        raise typer.BadParameter(f"--level must be one of {', '.join(valid)}, got {level!r}")
    return level


def check_treebank(value: str) -> str:
    if value != "silver-sm" and not Path(value).is_dir():
        raise typer.BadParameter(f"--treebank must be silver-sm or a folder with train/dev/test.conllu, got {value!r}")
    return value


def needs_silver(treebank: str, what: str) -> None:
    """On a fresh VEIL_HOME: one line naming the command that builds the silver treebank and how long it takes."""
    if treebank != "silver-sm":
        return
    from veil.errors import ResourceMissingError
    from veil.parsing.treebank import SILVER_HOW, silver_dir

    if not (silver_dir() / "meta.json").is_file():
        raise ResourceMissingError("the silver treebank", "veil parse treebank",
                                   message=f"{what} needs the silver treebank, which is not built yet; {SILVER_HOW}")


def check_method(method: str, neural_model: Optional[Path], level: str) -> str:
    """``--method`` and ``--neural-model`` checked together (``veil obfuscate`` and ``veil parse client``)."""
    from veil.parsing.obfuscate_file import METHODS

    if method not in METHODS:
        raise typer.BadParameter(f"--method must be one of {', '.join(METHODS)}, got {method!r}")
    if (method == "neural") != (neural_model is not None):
        raise typer.BadParameter("--neural-model goes with --method neural, and --method neural needs it")
    if neural_model is not None and not neural_model.is_file():
        raise typer.BadParameter(f"--neural-model {neural_model} is not a file; train one with `veil parse "
                                 f"obfuscator train --level {level}`")
    return method


def obfuscate(
    file: Annotated[Path, typer.Argument(help="CoNLL-U (Penn tags in XPOS) or plain text, one sentence per line "
                                              "(tagged with spaCy sm).")],
    method: MethodOpt = "random",
    level: LevelOpt = "P3",
    treebank: TreebankOpt = "silver-sm",
    neural_model: NeuralModelOpt = None,
    key: Annotated[Optional[Path], typer.Option(help="Write the secret key (positions and originals) here, "
                                                     "mode 0600.")] = None,
    seed: Annotated[Optional[int], typer.Option(min=0, help="Reproducible draws (experiments only; default: OS "
                                                            "entropy).")] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Obfuscate sentences: words of the hidden tags replaced by other public words of the same tag (drawn
    uniformly, or by the trained neural obfuscator)."""
    from veil.outputs import check_distinct_outputs, check_output_file
    from veil.parsing.obfuscate_file import obfuscate_file

    check_level(level)
    check_method(method, neural_model, level)
    if not file.is_file():
        raise typer.BadParameter(f"{file} is not a file")
    check_distinct_outputs({"--key": key}, {"FILE": file, "--neural-model": neural_model})
    if key is not None:
        check_output_file(key, force=force, option="--key")
    if method == "random":
        needs_silver(check_treebank(treebank), "veil obfuscate (its substitution vocabulary)")
    out = obfuscate_file(file, level=check_level(level), treebank=check_treebank(treebank), seed=seed, key_path=key,
                         method=method, neural_model=neural_model)
    if as_json:
        echo_json([{"words": list(o.words), "tags": list(o.tags), "positions": list(o.key.positions)} for o in out])
        return
    for o in out:
        typer.echo(" ".join(o.words))


def register(app: typer.Typer) -> None:
    app.command("obfuscate")(obfuscate)
