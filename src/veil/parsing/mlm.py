"""The text veil's masked LM trains on (the silver treebank's train split), and the quick model made on demand.

The masked LM (:mod:`veil.models.mlm`, trained by :mod:`veil.training.mlm`) learns from public text only: the train
split of a silver treebank (news-articles and Brown documents; a document's sentences are all in one split), with
held-out accuracy on its dev split. The test split, whose sentences the word-recovery attacks are scored on, is
never read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["mlm_training_data", "ensure_mlm"]


def mlm_training_data(treebank: str) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """``(train, heldout, data)``: the treebank's train split and dev split as (words, tags) pairs, and what the
    model's manifest says about them. The quick silver treebank is built first if missing (about 20 s)."""
    from veil.parsing.treebank import QUICK_SILVER, SILVER, SILVER_HOW, build_silver, load_treebank, silver_dir, \
        treebank_fingerprint, treebank_info

    if str(treebank) == QUICK_SILVER and not (silver_dir(QUICK_SILVER) / "meta.json").is_file():
        build_silver(name=QUICK_SILVER, progress=True)
    if str(treebank) == SILVER and not (silver_dir() / "meta.json").is_file():
        from veil.errors import ResourceMissingError

        raise ResourceMissingError("the silver treebank", "veil parse treebank",
                                   message=f"veil's masked LM trains on the silver treebank's train split, which is "
                                           f"not built yet; {SILVER_HOW}")
    train = load_treebank("train", treebank)
    dev = load_treebank("dev", treebank)
    info = treebank_info(treebank)
    data = {"treebank": str(treebank), "treebank_sha256": treebank_fingerprint(treebank), "split": "train",
            "heldout_split": "dev", "sources": info.get("sources"),
            "note": "public text: the treebank's train split; its test split (the word-recovery targets) is never "
                    "read"}
    return [(t.words, t.tags) for t in train], [(t.words, t.tags) for t in dev], data


def ensure_mlm(name: str, log: Callable[[str], None] = print) -> None:
    """Make sure the masked LM ``name`` is cached and sound: the quick one is trained here if missing, damaged (its
    weights fail their manifest's sha256, or the manifest does not read) or made by another configuration than
    :data:`~veil.training.mlm.QUICK_MLM` (about :data:`~veil.models.mlm.QUICK_MLM_MINUTES` minutes on 2 idle
    cores), and the log says which; the full one must have been
    trained (``veil models train mlm``, about 45 minutes): missing or damaged, it is a typed error naming that
    command."""
    from veil.errors import CacheCorruptError, DataFormatError
    from veil.models.mlm import MANIFEST, WEIGHTS, load_mlm, mlm_dir, read_manifest, train_command, weights_problem

    from veil.models.mlm import QUICK_MLM_MINUTES
    from veil.training.mlm import QUICK_MLM, train_mlm

    about = f"about {QUICK_MLM_MINUTES} minutes on 2 idle cores, longer on a busy machine"

    folder = mlm_dir(name)
    cached = (folder / WEIGHTS).is_file() and (folder / MANIFEST).is_file()
    damage = None
    if cached:
        try:
            manifest = read_manifest(folder, name)
            damage = weights_problem(folder, manifest)
        except (CacheCorruptError, DataFormatError) as exc:
            manifest, damage = {}, f"its manifest does not read ({exc})"
    if name != "mlm-quick":
        if not cached:
            load_mlm(name)  # raises ResourceMissingError naming `veil models train mlm`
        if damage is not None:
            raise CacheCorruptError(f"the masked LM {folder}", damage, train_command(name))
        return
    if damage is not None:
        log(f"veil's quick masked LM is damaged ({damage}): training it again ({about})")
    elif cached:
        made = dict(manifest.get("config") or {})
        want = QUICK_MLM.to_dict()
        if {k: v for k, v in made.items() if k != "threads"} == {k: v for k, v in want.items() if k != "threads"}:
            from veil.training.mlm import state_path

            if manifest.get("stopped") != "budget":
                return
            if state_path(folder).is_file():
                log(f"veil's quick masked LM was cut short by its minute cap at step {manifest.get('steps')} of "
                    f"{manifest.get('planned_steps')}: resuming it")
                train, heldout, data = mlm_training_data(QUICK_MLM.treebank)
                train_mlm(QUICK_MLM, train, heldout, data=data, log=log)
                return
            # cut short by a veil that did not keep the state to resume from: a weaker model for good otherwise
            log(f"veil's quick masked LM was cut short by its minute cap at step {manifest.get('steps')}, and no "
                f"state is left to resume it from: training it again ({about})")
        else:
            log(f"veil's quick masked LM was made by another configuration: training it again ({about})")
    else:
        log(f"veil's quick masked LM is not cached yet: training it now (`veil models train mlm --quick`, {about})")
    train, heldout, data = mlm_training_data(QUICK_MLM.treebank)
    train_mlm(QUICK_MLM, train, heldout, data=data, force=cached, log=log)
