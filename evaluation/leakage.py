"""Train/test leakage: refuse to evaluate a trained model on documents it was trained on.

A model trained by :mod:`training.loop` has ``training_data.json`` in its folder (written by
:func:`training.card.write_model_card`): the documents it saw, per task folder and split. An entry
concerns an evaluated corpus when its ``task`` is the corpus name (a registry task's folder is
``data/conteb/<task>``) or its ``folder`` is the corpus's source folder. Any document of such an
entry that is also in the corpus makes the evaluation meaningless, so it is refused with a reason
that starts with ``"refused:"`` (the runner reports the system as not run with that reason).
"""

from __future__ import annotations

from pathlib import Path

from evaluation.corpus import EvalCorpus
from training.card import TRAINING_DATA_FILE, read_training_data

REFUSED = "refused:"
MAX_EXAMPLES = 3


def _same_folder(a: str | None, b: str) -> bool:
    if not a:
        return False
    try:
        return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()
    except (OSError, RuntimeError):
        return False


def training_overlap_problem(trained_model_folder: Path, corpus: EvalCorpus) -> str | None:
    """Why the model in ``trained_model_folder`` must not be evaluated on ``corpus``, or None.

    None when the folder has no ``training_data.json`` (nothing recorded: a hub model, a model trained
    elsewhere) or when no document the model saw for this task is in ``corpus``.
    """
    folder = Path(trained_model_folder)
    try:
        entries = read_training_data(folder)
    except ValueError as error:
        return f"{REFUSED} cannot tell which documents {folder.name} was trained on: {error}"
    if not entries:
        return None
    evaluated = set(corpus.document_order)
    overlap: dict[str | None, set[str]] = {}
    for entry in entries:
        if entry["task"] != corpus.name and not _same_folder(entry.get("folder"), corpus.source):
            continue
        shared = evaluated.intersection(str(doc_id) for doc_id in entry["doc_ids"])
        if shared:
            overlap.setdefault(entry.get("split"), set()).update(shared)
    if not overlap:
        return None
    total = set().union(*overlap.values())
    splits = ", ".join(f"'{split}'" if split is not None else "every split" for split in overlap)
    examples = ", ".join(repr(doc_id) for doc_id in sorted(total)[:MAX_EXAMPLES])
    return (
        f"{REFUSED} {folder.name} was trained on {len(total)} document{'s' if len(total) != 1 else ''} "
        f"of task '{corpus.name}' "
        f"(split {splits}) that are also in the evaluated split '{corpus.split}': e.g. {examples} "
        f"(see {folder / TRAINING_DATA_FILE}); evaluate on a split disjoint from training (declare "
        f"`splits:` for the task in conteb.yaml, e.g. {{train: 0.5, test: 0.5, seed: 0}}, and retrain)"
    )
