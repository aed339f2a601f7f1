"""The learning rate train_multitask.py takes without --lr: chosen by the model's size, recorded with its reason."""
import dataclasses
import json

import pytest

import minbert
import multitask_classifier
import train_multitask
from tasks.config import BERT_BASE_LR, COMPACT_LR, LR_GIVEN, TOP_LAYERS_LR, lr_for_model
from tests.helpers import run_cli


def shape(layers: int, hidden: int) -> minbert.BertConfig:
    return minbert.BertConfig(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=4)


@pytest.mark.parametrize("layers, hidden, expected", [
    (12, 768, BERT_BASE_LR), (24, 1024, BERT_BASE_LR),                              # bert-base, bert-large
    (6, 384, COMPACT_LR), (12, 384, COMPACT_LR), (6, 768, COMPACT_LR), (4, 256, COMPACT_LR)])  # MiniLM, narrower
def test_the_rate_follows_the_models_size_and_says_why(layers, hidden, expected):
    lr, reason = lr_for_model(None, shape(layers, hidden))
    assert lr == expected and f"{layers} x {hidden}" in reason
    assert ("Devlin et al. 2019" in reason) == (expected == BERT_BASE_LR)


def test_a_given_rate_wins_and_a_frozen_encoder_takes_the_heads_rate():
    assert lr_for_model(3e-4, shape(12, 768)) == (3e-4, LR_GIVEN)
    lr, reason = lr_for_model(None, shape(12, 768), freeze_until="all")
    assert lr == COMPACT_LR and "--freeze-until all" in reason
    assert lr_for_model(None, shape(12, 768), freeze_until=12)[0] == COMPACT_LR  # every layer frozen


@pytest.mark.parametrize("freeze_until, expected", [(9, TOP_LAYERS_LR), (10, TOP_LAYERS_LR), (8, BERT_BASE_LR),
                                                    (0, BERT_BASE_LR)])
def test_bert_base_training_its_top_three_layers_takes_the_reports_rate(freeze_until, expected):
    lr, reason = lr_for_model(None, shape(12, 768), freeze_until=freeze_until)
    assert lr == expected
    quoted = "Freeze Your Layers" in reason and f"--freeze-until {freeze_until}" in reason
    assert quoted == (expected == TOP_LAYERS_LR)
    # a compact model keeps its rate, frozen or not: the embedded model's default run and figures
    assert lr_for_model(None, shape(6, 384), freeze_until=freeze_until)[0] == COMPACT_LR


def test_a_run_on_a_bert_base_sized_encoder_records_its_rate(tiny_model, small_data_dir):
    """build_run picks the rate from the encoder it trains (here 12 x 768, random weights, never saved to disk)
    and config.json records it, with its reason, in the arguments that --resume reads back."""
    from tasks.inputs import prepare
    from tasks.training import build_run, parse_train_command
    from tasks.training.record import run_record
    config = parse_train_command(["--model", str(tiny_model), "--data-dir", str(small_data_dir), "--tasks", "sst",
                                  "--device", "cpu", "--precision", "fp32"]).config
    assert config.lr is None  # not given
    inputs = prepare(config)
    base = minbert.build_model(minbert.BertConfig(vocab_size=inputs.encoder.config.vocab_size))  # 12 x 768
    run = build_run(config, inputs, encoder=base)
    assert run.config.lr == BERT_BASE_LR and run.scheduler.base_lrs == [BERT_BASE_LR, BERT_BASE_LR]  # the optimizer's
    record = run_record(run).to_json()
    assert record["lr"]["used"] == BERT_BASE_LR and "12 x 768" in record["lr"]["reason"]
    assert record["arguments"]["lr"] == BERT_BASE_LR
    compact = build_run(config, inputs)  # the tiny encoder itself: 2 x 32
    assert compact.config.lr == COMPACT_LR and "2 x 32" in compact.lr_reason
    frozen = build_run(dataclasses.replace(config, freeze_until="all"), inputs, encoder=base)
    assert frozen.config.lr == COMPACT_LR
    top = build_run(dataclasses.replace(config, freeze_until=9), inputs, encoder=base)
    assert top.config.lr == TOP_LAYERS_LR and "Freeze Your Layers" in run_record(top).lr.reason


def train(main, argv, out):
    code, _, err = run_cli(main, argv + ["--out", str(out)])
    assert code == 0, err
    return json.loads((out / "config.json").read_text())


def test_train_multitask_records_the_rate_and_its_reason_and_resume_keeps_it(tiny_model, small_data_dir,
                                                                             tmp_path):
    base = ["--model", str(tiny_model), "--data-dir", str(small_data_dir), "--tasks", "sst", "--batch-size", "8",
            "--precision", "fp32", "--device", "cpu", "--max-steps", "1"]
    chosen = train(train_multitask.main, base, tmp_path / "chosen")
    assert chosen["lr"]["used"] == COMPACT_LR and "compact models (2 x 32" in chosen["lr"]["reason"]
    assert chosen["arguments"]["lr"] == COMPACT_LR
    given = train(train_multitask.main, base + ["--lr", "3e-4"], tmp_path / "given")
    assert given["lr"] == {"used": 3e-4, "reason": LR_GIVEN} and given["arguments"]["lr"] == 3e-4
    course = train(multitask_classifier.main, base + ["--fine-tune-mode", "full-model"], tmp_path / "course")
    assert course["lr"] == chosen["lr"]
    from tasks.training import parse_train_command
    assert parse_train_command(["--resume", str(tmp_path / "chosen")]).config.lr == COMPACT_LR  # the recorded rate


def test_the_lr_flags_help_says_what_bert_base_gets():
    from tasks.training import train_parser
    text = train_parser().format_help()
    assert "2e-05 for 12 layers x 768" in " ".join(text.split())
