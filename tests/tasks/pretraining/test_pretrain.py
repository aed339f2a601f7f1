"""pretrain.py: the corpus (reading, the tokenised cache, packing, the held-out share), BERT's dynamic and whole-word
masking, and whole runs of a tiny model through the training loop (a kill and a resume bit for bit, the --save-at
ladder, the exported model in transformers and as this project's --model, a held-out loss that goes down, a bad
corpus file in one line).

Runs use a 2-layer x 32 model drawn with the embedded model's vocabulary on a corpus written here, 32-token
sequences: seconds each.
"""
import json
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch

import minbert
import pretrain
import train_multitask
from tasks.course.provenance import run_problems, run_provenance
from tasks.pretraining import INFO_FILE, MODEL_DIR, Masking, ladder_folder
from tasks.pretraining import tokenised as tokenised_module
from tasks.pretraining.corpus import read_corpus_file, split_documents
from tasks.pretraining.job import PassTagged, step_tokens, steps_for_tokens
from tasks.pretraining.masking import IGNORE
from tasks.pretraining.packing import Sequences, pack, split_held_out
from tasks.pretraining.prepared import read_sources
from tasks.pretraining.tokenised import tokenise
from tasks.training import build_sampler
from tests.helpers import REPO, run_cli
from tests.helpers.corpus import TINY, corpus_text
from tests.helpers.runs import assert_same, scalars, without_times


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretrain")
    (root / "tiny.json").write_text(json.dumps(TINY))
    (root / "corpus.txt").write_text(corpus_text(), encoding="utf-8")
    return root


def base(files, *more):
    return ["--init-config", str(files / "tiny.json"), "--corpus", str(files / "corpus.txt"), "--max-length", "32",
            "--batch-size", "8", "--device", "cpu", "--precision", "fp32", "--cache-dir", str(files / "cache"),
            "--held-out", "0.1", *more]


# ------------------------------------------------------------------------------------------------ masking

def random_sequences(tokenizer, n=300, length=128, seed=0):
    rng = np.random.default_rng(seed)
    body = rng.integers(1000, len(tokenizer), size=(n, length - 2))
    return [np.concatenate([[tokenizer.cls_id], row, [tokenizer.sep_id]]).astype(np.int32) for row in body]


def test_masking_chooses_15_percent_and_replaces_80_10_10_never_a_special_token(tokenizer):
    masking = Masking.for_tokenizer(tokenizer, seed=3)
    chosen = replaced = randomised = kept = total = 0
    for i, ids in enumerate(random_sequences(tokenizer)):
        inputs, labels = masking.mask(ids, stream=0, sequence=i)
        picked = labels != IGNORE
        assert not picked[0] and not picked[-1]  # [CLS] and [SEP]
        assert (labels[picked] == ids[picked]).all()
        assert (inputs[~picked] == ids[~picked]).all()
        total += len(ids) - 2
        chosen += picked.sum()
        replaced += (inputs[picked] == masking.mask_id).sum()
        kept += (inputs[picked] == ids[picked]).sum()
        drawn = (inputs[picked] != ids[picked]) & (inputs[picked] != masking.mask_id)
        randomised += drawn.sum()
        assert not masking.special[inputs[picked][drawn]].any()
    rate = chosen / total
    assert abs(rate - 0.15) < 4 * np.sqrt(0.15 * 0.85 / total)
    for share, expected in ((replaced, 0.8), (randomised, 0.1), (kept, 0.1)):
        # a random draw can land on the token itself (1 in 30k): within the sampling error anyway
        assert abs(share / chosen - expected) < 4 * np.sqrt(expected * (1 - expected) / chosen), (share, expected)


def test_masks_are_new_each_pass_and_the_same_for_the_same_pass(tokenizer):
    masking = Masking.for_tokenizer(tokenizer, seed=0)
    ids = random_sequences(tokenizer, n=1)[0]
    first, again, next_pass = (masking.mask(ids, stream, 5)[1] for stream in (0, 0, 1))
    assert (first == again).all() and not (first == next_pass).all()


def test_whole_word_masking_masks_every_piece_of_a_word_or_none(tokenizer):
    text = " ".join(["unbelievably reorganised weatherman"] * 40)
    ids = np.array([tokenizer.cls_id, *tokenizer.backend.encode(text, add_special_tokens=False).ids,
                    tokenizer.sep_id], dtype=np.int32)
    masking = Masking.for_tokenizer(tokenizer, whole_word=True)
    pieces = [tokenizer.backend.id_to_token(int(i)) for i in ids]
    assert sum(p.startswith("##") for p in pieces) > 40  # the text has words of several pieces
    words = masking.units(ids)
    partial = seen = 0
    for seq in range(50):
        picked = masking.mask(ids, 0, seq)[1] != IGNORE
        for word in np.unique(words[1:-1]):
            members = picked[words == word]
            partial += members.any() and not members.all()
            seen += members.all() and len(members) > 1
    assert partial == 0 and seen > 0


# ------------------------------------------------------------------------------------------------ the corpus

def test_packing_keeps_lines_whole_within_documents_and_cuts_only_longer_lines(tokenizer, tmp_path):
    path = tmp_path / "c.txt"
    long_line = " ".join(["word"] * 70)
    path.write_text("one two three\nfour five\n\n" + long_line + "\nsix\n\n\nseven\n", encoding="utf-8")
    source = read_corpus_file(path)
    assert [len(d) for d in source.documents] == [2, 2, 1]
    packed = pack([tokenise(source, tokenizer, None)], 32, tokenizer.cls_id, tokenizer.sep_id)
    texts = [tokenizer.backend.decode(packed[i].tolist(), skip_special_tokens=False) for i in range(len(packed))]
    assert texts[0] == "[CLS] one two three four five [SEP]"           # two lines share a sequence
    assert all(len(packed[i]) <= 32 and t.startswith("[CLS] ") and t.endswith(" [SEP]") for i, t in enumerate(texts))
    assert [t.count("word") for t in texts[1:4]] == [30, 30, 10]      # the 70-word line cut in 30s ...
    assert texts[3].endswith("word six [SEP]")                          # ... its rest shares with the next line
    assert texts[4:] == ["[CLS] seven [SEP]"]                           # no sequence crosses a document's end


def test_held_out_share_is_seeded_disjoint_and_complete():
    train, held = split_held_out(1000, 0.05, seed=1)
    assert len(held) == 50 and not set(train) & set(held) and set(train) | set(held) == set(range(1000))
    again, other = split_held_out(1000, 0.05, seed=1)[1], split_held_out(1000, 0.05, seed=2)[1]
    assert (again == held).all() and not (other == held).all()
    sequences = Sequences(np.arange(10, dtype=np.int32), np.array([0, 3, 5, 10]))
    assert sequences.rows([2, 0]).lengths == [5, 3] and sequences.rows([2, 0])[1].tolist() == [0, 1, 2]


def test_tokenised_once_then_read_from_the_cache_until_the_file_changes(tokenizer, tmp_path, monkeypatch):
    calls = []
    real = tokenised_module._encode
    monkeypatch.setattr(tokenised_module, "_encode", lambda *a: calls.append(1) or real(*a))
    path, cache = tmp_path / "c.txt", tmp_path / "cache"
    path.write_text(corpus_text(3), encoding="utf-8")
    first = tokenise(read_corpus_file(path), tokenizer, cache)
    second = tokenise(read_corpus_file(path), tokenizer, cache)
    assert (not first.cached, second.cached, len(calls)) == (True, True, 1)
    assert (first.ids == second.ids).all() and (first.line_ends == second.line_ends).all()
    path.write_text(corpus_text(3) + "one more line\n", encoding="utf-8")
    third = tokenise(read_corpus_file(path), tokenizer, cache)
    assert not third.cached and len(calls) == 2 and third.tokens > first.tokens


def test_tasks_give_their_training_sentences_only(small_data_dir, monkeypatch):
    from tasks.pretraining import corpus
    asked = []
    real = corpus.read_split
    monkeypatch.setattr(corpus, "read_split", lambda d, task, split, **k: asked.append(split) or
                        real(d, task, split, **k))
    sources = read_sources([], "sst,quora", small_data_dir)
    assert asked == ["train", "train"]
    assert [s.path.rsplit("/", 1)[1] for s in sources] == ["ids-sst-train.csv", "quora-train.csv"]
    text = "\n".join(line for s in sources for doc in s.documents for line in doc)
    dev = (small_data_dir / "ids-sst-dev.csv").read_text(encoding="utf-8").splitlines()[1].split("\t")[2].strip()
    assert dev and dev not in text


def test_a_token_budget_is_the_first_step_that_reaches_it():
    lengths = [5, 7, 3, 9, 4, 6, 8]
    sampler = PassTagged(build_sampler("proportional", {"mlm": lengths}, 2, 0), len(lengths))
    seen = np.cumsum(np.concatenate([step_tokens(sampler.plan(e), lengths, 7) for e in range(3)]))
    for budget in (1, 5, 42, 43, 60, 100):
        steps = steps_for_tokens(budget, sampler, lengths)
        assert seen[steps - 1] >= budget and (steps == 1 or seen[steps - 2] < budget), budget


# ------------------------------------------------------------------------------------------------ bad input

@pytest.mark.parametrize("name,content,needle", [
    ("missing.txt", None, "no such file"), ("empty.txt", b"\n \n", "empty"),
    ("binary.txt", b"PK\x03\x04\x00\x00text", "binary"), ("latin1.txt", "caf\xe9\n".encode("latin-1"), "not UTF-8")])
def test_a_missing_empty_or_binary_corpus_is_one_line_naming_it_exit_2(files, tmp_path, name, content, needle):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    code, out, err = run_cli(pretrain.main, base(files, "--corpus", str(path), "--out", str(tmp_path / "run")))
    assert code == 2 and len(err.strip().splitlines()) == 1 and str(path) in err and needle in err, err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("argv,needle", [
    (["--tasks", "sst,nope"], "unknown task 'nope'"), (["--max-length", "4"], "--max-length must be >= 8"),
    (["--tokens", "1M", "--max-steps", "3"], "one budget"), (["--tokens", "1k", "--save-at", "2k"], "beyond")])
def test_bad_options_are_one_line_exit_2(files, tmp_path, argv, needle):
    code, _, err = run_cli(pretrain.main, base(files, *argv, "--out", str(tmp_path / "run")))
    assert code == 2 and len(err.strip().splitlines()) == 1 and needle in err, err


def test_help_says_why_there_is_no_next_sentence_objective():
    from tasks.pretraining.options import pretrain_parser
    text = pretrain_parser().format_help()
    assert "no next-sentence objective" in text and "RoBERTa" in text and "--save-at" in text


# ------------------------------------------------------------------------------------------------ whole runs

DRIVER = r'''
import json, os, signal, sys
sys.path.insert(0, sys.argv[1])
from tasks.training import outputs
from tasks.pretraining import pretrain_command

at, argv = int(sys.argv[2]), sys.argv[3:]
real_save = outputs.save_checkpoint
def save_checkpoint(out_dir, state):
    real_save(out_dir, state)
    if json.loads(state["progress"])["global_step"] == at:
        os.kill(os.getpid(), signal.SIGKILL)
outputs.save_checkpoint = save_checkpoint
sys.exit(pretrain_command(argv))
'''


def run_driver(tmp_path, kill_at, argv, processes=1):
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    launch = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes)]
    launch = launch if processes > 1 else []
    proc = subprocess.run([sys.executable, *launch, str(driver), str(REPO), str(kill_at), *argv], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


RUN = ["--max-steps", "10", "--checkpoint-every", "3", "--eval-every", "4", "--save-at", "0", "500", "1500"]


@pytest.fixture(scope="module")
def unbroken(files, tmp_path_factory):
    out = tmp_path_factory.mktemp("unbroken") / "run"
    code, _, err = run_cli(pretrain.main, base(files, *RUN, "--out", str(out)))
    assert code == 0, err
    return out


def test_killed_and_resumed_run_ends_as_the_unbroken_one_bit_for_bit(files, unbroken, tmp_path):
    out = tmp_path / "run"
    code, _, err = run_driver(tmp_path, 6, base(files, *RUN, "--out", str(out)))
    assert code == -signal.SIGKILL, err
    code, _, err = run_driver(tmp_path, -1, ["--resume", str(out)])
    assert code == 0, err
    final_a, final_b = (torch.load(d / "checkpoint.pt", weights_only=True) for d in (unbroken, out))
    progress_a, progress_b = (without_times(json.loads(c.pop("progress"))) for c in (final_a, final_b))
    assert_same(final_a, final_b)  # weights, optimizer, schedule, RNG states
    assert progress_a == progress_b
    for folder in (MODEL_DIR, ladder_folder(0), ladder_folder(500), ladder_folder(1500)):
        for name in ("model.safetensors", INFO_FILE):
            assert (out / folder / name).read_bytes() == (unbroken / folder / name).read_bytes(), (folder, name)
    metrics_a, metrics_b = (json.loads((d / "metrics.json").read_text()) for d in (unbroken, out))
    assert without_times(metrics_a) == without_times(metrics_b)
    timed = "train/tokens_per_s"
    assert {k: v for k, v in scalars(out).items() if k != timed} == \
        {k: v for k, v in scalars(unbroken).items() if k != timed}


def test_the_ladder_saves_at_the_first_step_past_each_budget(unbroken):
    record = json.loads((unbroken / "config.json").read_text())
    assert record["corpus"]["sources"][0]["sha256"] and record["masking"]["probability"] == 0.15
    steps = []
    for budget in (500, 1500):
        info = json.loads((unbroken / ladder_folder(budget) / INFO_FILE).read_text())
        assert info["tokens"] >= budget and info["budget"] == budget
        steps.append(info["step"])
    final = json.loads((unbroken / MODEL_DIR / INFO_FILE).read_text())
    assert steps[0] < steps[1] <= final["step"] == 10
    untrained = json.loads((unbroken / ladder_folder(0) / INFO_FILE).read_text())
    assert (untrained["step"], untrained["tokens"]) == (0, 0)
    # each rung is evaluated on the held-out sequences when written: the untrained one the worst
    assert untrained["held_out"]["masked_loss"] > final["held_out"]["masked_loss"]
    assert all(0 <= json.loads((unbroken / ladder_folder(b) / INFO_FILE).read_text())["held_out"]["masked_accuracy"]
               <= 1 for b in (500, 1500))
    per_step = final["tokens"] / final["step"]
    assert all(info_tokens_before(budget, step, per_step) for budget, step in zip((500, 1500), steps))


def info_tokens_before(budget, step, per_step) -> bool:
    """The step before the ladder's had not reached the budget (the sequences are nearly all full)."""
    return (step - 1) * per_step < budget * 1.2


def test_exported_model_loads_in_transformers_fill_mask_and_as_this_projects_model(unbroken, small_data_dir,
                                                                                    tmp_path):
    import transformers
    folder = unbroken / MODEL_DIR
    hf, info = transformers.BertForMaskedLM.from_pretrained(str(folder), output_loading_info=True)
    assert not info["missing_keys"] and not info["mismatched_keys"]
    ours = minbert.mlm_from_pretrained(str(folder), implementation="reference")
    ids = torch.tensor([[101, 1996, 4937, 103, 2006, 1996, 13523, 102]])
    with torch.no_grad():
        assert (hf.eval()(input_ids=ids).logits - ours(ids)).abs().max() <= 1e-5
    fill = transformers.pipeline("fill-mask", model=str(folder), tokenizer=str(folder), device="cpu")
    assert len(fill("the cat [MASK] on the mat .")) == 5
    assert minbert.from_pretrained(str(folder)).num_layers == 2  # the encoder every command's --model loads
    code, _, err = run_cli(train_multitask.main, ["--model", str(folder), "--data-dir", str(small_data_dir),
                                                  "--max-steps", "1", "--batch-size", "4", "--device", "cpu",
                                                  "--out", str(tmp_path / "finetuned")])
    assert code == 0, err
    # the fine-tuned run records how its model was made, and the hand-in reads it
    made = json.loads((tmp_path / "finetuned" / "config.json").read_text())["model"]["pretraining"]
    assert made["lineage"]["init_config"] and made["tokens"] > 0
    problems = run_problems(run_provenance(tmp_path / "finetuned"))
    assert [k for k, text in problems if k == "other-model" and "corpus.txt" in text] == ["other-model"]


def test_continued_pretraining_loads_the_head_where_the_checkpoint_has_one(files, unbroken, tiny_model, tmp_path):
    """--from a pretraining run's model continues with its head; --from an encoder (no cls.*) draws one."""
    corpus = ["--corpus", str(files / "corpus.txt"), "--max-length", "32", "--batch-size", "8", "--device", "cpu",
              "--precision", "fp32", "--cache-dir", str(files / "cache"), "--held-out", "0.1", "--max-steps", "2"]
    for start, drawn in ((unbroken / MODEL_DIR, False), (tiny_model, True)):
        out = tmp_path / start.name
        code, _, err = run_cli(pretrain.main, ["--from", str(start), *corpus, "--out", str(out)])
        assert code == 0, err
        record = json.loads((out / "config.json").read_text())
        assert record["arguments"]["lr"] == 1e-4  # the continued default
        initialised = record["model"]["from"]["initialised_tensors"]
        assert any(t.startswith("cls.predictions.") for t in initialised) == drawn, initialised
        lineage = json.loads((out / MODEL_DIR / "pretraining.json").read_text())["lineage"]
        assert lineage["from"]["weights_sha256"] == record["model"]["from"]["weights_sha256"]
        assert [s["kind"] for s in lineage["corpus"]] == ["file"]
        # a model pretrain.py made carries its own lineage into the next round's
        assert ("from_pretraining" in lineage) == (not drawn)
        if not drawn:
            assert lineage["from_pretraining"]["init_config"]


def test_resume_refuses_a_corpus_that_changed(unbroken, tmp_path):
    import shutil
    run = tmp_path / "run"
    shutil.copytree(unbroken, run)
    record = json.loads((run / "config.json").read_text())
    record["corpus"]["sources"][0]["sha256"] = "0" * 64  # as if the file had been edited since
    (run / "config.json").write_text(json.dumps(record))
    code, _, err = run_cli(pretrain.main, ["--resume", str(run)])
    assert code == 2 and "is not the file the run started from" in err and len(err.strip().splitlines()) == 1, err


def test_two_processes_end_with_the_weights_of_one(files, tmp_path):
    """torchrun, 2 CPU processes: the masks are the sequences' own and each rank's loss is weighted by its share
    of the batch's masked tokens, so the run is one process's up to float rounding (dropout off)."""
    argv = base(files, "--max-steps", "4", "--batch-size", "7", "--dropout", "0", "--eval-every", "0",
                "--save-at", "0", "300")  # every rank evaluates a rung's held-out share
    code, _, err = run_cli(pretrain.main, argv + ["--out", str(tmp_path / "one")])
    assert code == 0, err
    code, out, err = run_driver(tmp_path, -1, argv + ["--out", str(tmp_path / "two")], processes=2)
    assert code == 0, err
    one, two = (torch.load(tmp_path / r / "checkpoint.pt", weights_only=True)["model"] for r in ("one", "two"))
    assert max((one[k] - two[k]).abs().max().item() for k in one) < 1e-5
    metrics = [json.loads((tmp_path / r / "metrics.json").read_text())["final"] for r in ("one", "two")]
    assert abs(metrics[0]["masked_loss"] - metrics[1]["masked_loss"]) < 1e-4
    assert json.loads((tmp_path / "two" / "config.json").read_text())["world_size"] == 2
    assert out.count("held-out masked-token accuracy") == 1  # rank 0 alone reports
    rungs = [json.loads((tmp_path / r / ladder_folder(300) / INFO_FILE).read_text()) for r in ("one", "two")]
    assert rungs[0]["step"] == rungs[1]["step"]
    assert abs(rungs[0]["held_out"]["masked_loss"] - rungs[1]["held_out"]["masked_loss"]) < 1e-4


def test_the_held_out_loss_goes_down_on_a_repetitive_corpus(files, tmp_path):
    out = tmp_path / "run"
    code, _, err = run_cli(pretrain.main, base(files, "--max-steps", "40", "--eval-every", "5", "--lr", "1e-2",
                                               "--warmup", "0", "--out", str(out)))
    assert code == 0, err
    history = json.loads((out / "metrics.json").read_text())["history"]
    first, last = history[0]["dev"], history[-1]["dev"]
    # measured here: 8.9 at step 5, 3.5 at step 40
    assert last["masked_loss"] < first["masked_loss"] - 3.0


def test_split_documents_ends_documents_at_blank_lines():
    assert split_documents("a\n b \n\n\n c\n  \nd") == [["a", "b"], ["c"], ["d"]]


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_a_short_pretraining_run_on_cuda(files, tmp_path, precision):
    """On a GPU: the reference implementation, bf16 autocast or fp16 with the gradient scaler (its state in the
    checkpoint), a finite held-out loss, and an export that loads on the CPU."""
    if precision == "bf16" and not minbert.native_bf16(torch.device("cuda")):
        pytest.skip("this GPU has no native bf16")
    out = tmp_path / "run"
    code, _, err = run_cli(pretrain.main, base(files, "--device", "cuda", "--precision", precision, "--max-steps", "6",
                                               "--out", str(out)))
    assert code == 0, err
    config = json.loads((out / "config.json").read_text())
    assert config["device"].startswith("cuda") and config["implementation"]["used"] == "reference"
    assert config["precision"]["used"] == precision
    assert bool(torch.load(out / "checkpoint.pt", weights_only=True)["scaler"]) == (precision == "fp16")
    final = json.loads((out / "metrics.json").read_text())["final"]
    assert np.isfinite(final["masked_loss"]) and final["masked_accuracy"] >= 0
    assert minbert.mlm_from_pretrained(str(out / MODEL_DIR)).num_layers == 2
