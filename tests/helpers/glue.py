"""Small GLUE-format CoLA and MRPC files and the task file that declares them."""
import json

import numpy as np

WORDS = "the a film plot actor scene music story ending cast director script dull great slow warm".split()


def _sentence(rng, n=6):
    return " ".join(rng.choice(WORDS, size=n))


def write_cola(folder, n_train=24, n_dev=12, n_test=5):
    """CoLA's layout: train and dev without a header (source, label, original mark, sentence); test with
    `index sentence`."""
    rng = np.random.default_rng(0)
    labels = {}
    for split, n in (("train", n_train), ("dev", n_dev)):
        rows, labels[split] = [], []
        for i in range(n):
            label = int(i % 3 != 0)
            labels[split].append(label)
            rows.append(f"gj0{i % 4}\t{label}\t{'' if label else '*'}\t{_sentence(rng)} .\n")
        (folder / f"{split}.tsv").write_text("".join(rows))
    (folder / "test.tsv").write_text("index\tsentence\n" + "".join(f"{i}\t{_sentence(rng)} .\n"
                                                                   for i in range(n_test)))
    return labels


def write_mrpc(folder, n_train=24, n_dev=12):
    """MRPC's layout: `Quality #1 ID #2 ID #1 String #2 String`, with the unbalanced quotes its sentences have
    (GLUE reads its TSVs without quote processing)."""
    rng = np.random.default_rng(1)
    head = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    for split, n in (("train", n_train), ("dev", n_dev)):
        rows = [f"{i % 2}\t{1000 + i}\t{2000 + i}\tHe said \" the {_sentence(rng, 4)} .\t{_sentence(rng)} .\n"
                for i in range(n)]
        (folder / f"mrpc-{split}.tsv").write_text(head + "".join(rows))


def task_file(folder, **extra):
    declarations = {
        "cola": {"train": "train.tsv", "dev": "dev.tsv",
                 "test": {"file": "test.tsv", "header": True, "text": ["sentence"], "id": "index"},
                 "header": False, "text": [3], "label": 1, "classes": 2, "metric": "mcc", "max_length": 32},
        "mrpc": {"train": "mrpc-train.tsv", "dev": "mrpc-dev.tsv", "text": ["#1 String", "#2 String"],
                 "label": "Quality", "classes": 2, "metric": "f1", "max_length": 48},
        **extra}
    path = folder / "tasks.json"
    path.write_text(json.dumps(declarations))
    return path
