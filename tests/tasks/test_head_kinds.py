"""Head kinds are declared once (tasks/head_kinds.py): the records drive every site, and a fourth kind is one record.

The fourth kind here is "ordinal": integer classes 0..N-1 predicted by one score, rounded. It is registered for the
length of one test, with a declared task of that kind, and runs through the sites that read a head kind: reading
the task's files, encoding its labels, the head's width, loss and predictions, the prediction file, and what
tasks.json says the head reads.
"""
import dataclasses
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import minbert
from tasks import head_kinds, registry
from tasks.course.formats import prediction_text
from tasks.data import read_split
from tasks.encoded import encode_split
from tasks.head_kinds import BINARY, CLASSIFY, HEAD_KINDS, REGRESS, Reading
from tasks.heads import MultitaskModel, task_spec

REPO = Path(__file__).resolve().parents[2]

ORDINAL = dataclasses.replace(
    REGRESS, name="ordinal", word="ordinal", integer_labels=True, declared_format="label",
    loss=lambda o, y, r: F.mse_loss(o.float(), y.float()),
    predict=lambda o, r: o.float().round().clamp(r.low, r.high).long(),
    classes=lambda cfg: range(int(cfg.label_range[0]), int(cfg.label_range[1]) + 1),
    prediction_column="prediction", probe="logistic", siamese_cosine=False, report_pair_head=None,
    output_note=lambda cfg: ", a class: the score rounded")


@pytest.fixture
def ordinal_task(tmp_path, monkeypatch):
    """A declared task of the fourth kind, "stars" (0..4), with train and dev files of a few rows."""
    monkeypatch.setitem(HEAD_KINDS, ORDINAL.name, ORDINAL)
    rows = ["id\tsentence\tstars"] + [f"r{i}\ta sentence number {i}\t{i % 5}" for i in range(12)]
    for split in ("train", "dev"):
        (tmp_path / f"stars-{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    cfg = registry.TaskConfig(
        name="stars", files={s: str(tmp_path / f"stars-{s}.tsv") for s in ("train", "dev")},
        text_columns=("sentence",), label_column="stars", head_kind=ORDINAL.name, metric="pearson",
        label_range=(0, 4), num_classes=None, prediction_header="prediction", prediction_format="label",
        outputs={}, delimiter="\t", quoting=False, prediction_style="tsv", declared_in=str(tmp_path / "tasks.json"))
    registry.set_declared_tasks([cfg])
    yield cfg
    registry.set_declared_tasks([])


def test_a_fourth_head_kind_runs_through_every_site(ordinal_task, tiny_model, tmp_path):
    cfg = ordinal_task
    assert cfg.kind is ORDINAL and cfg.describe()["head"] == "ordinal"
    dev = read_split(tmp_path, "stars", "dev")
    assert [e.label for e in dev.examples[:6]] == [0, 1, 2, 3, 4, 0]  # integer labels, as the record says
    tokenizer = minbert.Tokenizer.from_folder(tiny_model, max_length=32)
    part = encode_split(dev, tokenizer, "cross")
    assert part.labels.dtype == torch.float32
    model = MultitaskModel(minbert.from_pretrained(str(tiny_model)), ("stars",)).eval()
    assert model.heads["stars"].out_features == 1  # no classes: one output
    batch = tokenizer.collate([e[0] for e in part.encodings])
    spec = task_spec("stars")
    out = model("stars", batch)
    loss = spec.loss(out, part.labels)
    loss.backward()
    assert torch.isfinite(loss) and spec.probabilities is None
    predictions = spec.predict(torch.tensor([-1.0, 0.4, 2.6, 9.0]))
    assert predictions.tolist() == [0, 0, 3, 4]
    text = prediction_text("stars", ["a", "b", "c", "d"], predictions.tolist())
    assert text == "id\tprediction\na\t0\nb\t0\nc\t3\nd\t4\n"
    with pytest.raises(ValueError, match="not one of"):
        prediction_text("stars", ["a"], [5])
    from tasks.saved.model_folder import describe_heads
    assert describe_heads(model, {})["tasks"]["stars"]["reads"].endswith(", a class: the score rounded")


def test_the_course_kinds_records():
    """What the course's three kinds are, field by field where a site reads it."""
    sst, quora, sts = (registry.get_task(t) for t in ("sst", "quora", "sts"))
    assert (sst.kind, quora.kind, sts.kind) == (CLASSIFY, BINARY, REGRESS)
    assert [k.label_dtype for k in (CLASSIFY, BINARY, REGRESS)] == [torch.long, torch.float32, torch.float32]
    assert [k.outputs(c) for k, c in ((CLASSIFY, sst), (BINARY, quora), (REGRESS, sts))] == [5, 1, 1]
    assert (list(CLASSIFY.classes(sst)), list(BINARY.classes(quora)), REGRESS.classes(sts)) == ([0, 1, 2, 3, 4],
                                                                                               [0, 1], None)
    assert CLASSIFY.probability_columns(sst) == ["p_0", "p_1", "p_2", "p_3", "p_4"]
    assert (BINARY.probability_columns(quora), REGRESS.probability_columns(sts)) == (["p_1"], [])
    assert [k.probe for k in (CLASSIFY, BINARY, REGRESS)] == ["logistic", "logistic", "ridge"]
    assert [k.metrics for k in (CLASSIFY, BINARY, REGRESS)] == [("accuracy", "mcc", "f1", "macro_f1")] * 2 + [
        ("pearson", "spearman")]
    assert REGRESS.output_note(sts) == ", score 5.0 * sigmoid(logit)"
    with pytest.raises(ValueError, match="unknown head kind 'multi'"):
        head_kinds.head_kind("multi")


def test_the_regression_kind_reads_a_logit_or_a_cosine():
    logits = torch.tensor([0.0, 100.0, -100.0])
    cross = Reading(0.0, 5.0)
    assert REGRESS.predict(logits, cross).tolist() == [2.5, 5.0, 0.0]
    cosines = torch.tensor([0.5, -0.2])
    assert REGRESS.predict(cosines, Reading(0.0, 5.0, siamese=True)).tolist() == [2.5, 0.0]
    gold = torch.tensor([2.5, 0.0])
    assert REGRESS.loss(cosines, gold, Reading(0.0, 5.0, siamese=True)).item() == pytest.approx((0 + 0.04) / 2)
    assert REGRESS.loss(cosines, gold, Reading(0.0, 5.0, siamese=True, report=True)).item() == pytest.approx(0.0)
