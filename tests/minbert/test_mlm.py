"""The masked-language-model head (minbert/mlm.py) and its fast path (minbert/fast_mlm.py).

Against transformers' BertForMaskedLM on the same weights: logits at the masked positions, every position, and the
loss. The fast path against the reference: logits, loss, hits and every gradient, in float32 and bf16. The tied
decoder stays the word embeddings through optimizer steps and an export; an exported folder loads in transformers
with the same logits, runs in its fill-mask pipeline, and loads back here as an MLM model and as an encoder; a
checkpoint without the head gets BERT's initialisation, one with it is loaded exactly.
"""
import json

import pytest
import torch

import minbert
from minbert.errors import CheckpointError
from minbert.export import save_pretrained
from minbert.fast_mlm import FastBertForMaskedLM
from minbert.mlm import IGNORE_INDEX, BertForMaskedLM

WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "ran", "to", "house", "big", "small", "red", "blue", ".", ","]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + [f"w{i}" for i in range(100 - 5 - len(WORDS))]
CONFIG = dict(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
              max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
              initializer_range=0.2)
FP32_TOL = 1e-5


def models():
    """A reference and a fast MLM model with the same random weights (non-zero biases, uneven LayerNorms)."""
    torch.manual_seed(0)
    reference = BertForMaskedLM(minbert.BertConfig(**CONFIG, implementation="reference"))
    with torch.no_grad():
        for p in reference.parameters():
            p.add_(0.05 * torch.randn_like(p))
    fast = minbert.build_mlm_model(minbert.BertConfig(**CONFIG, implementation="fast"))
    fast.load_state_dict(reference.state_dict())
    assert type(reference) is BertForMaskedLM and type(fast) is FastBertForMaskedLM
    return reference, fast


def batch(seed=1):
    """Padded ids, mask, segments, and labels (-100 except at about a third of the real tokens)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([13, 4, 9, 13, 2])[:, None]
    mask = (torch.arange(13)[None] < lengths).long()
    ids = torch.randint(5, CONFIG["vocab_size"], (5, 13), generator=g) * mask
    types = ((torch.arange(13)[None] >= lengths // 2) & mask.bool()).long()
    masked = (torch.rand(5, 13, generator=g) < 0.35) & mask.bool()
    return ids, mask, types, torch.where(masked, ids, IGNORE_INDEX)


def hf_model(model):
    import transformers
    hf = transformers.BertForMaskedLM(transformers.BertConfig(**CONFIG)).eval()
    missing, unexpected = hf.load_state_dict(model.state_dict(), strict=False)
    assert not missing and set(unexpected) == {"bert.pooler.dense.weight", "bert.pooler.dense.bias"}
    return hf


def test_logits_and_loss_match_transformers():
    reference, fast = models()
    hf = hf_model(reference)
    ids, mask, types, labels = batch()
    masked = labels != IGNORE_INDEX
    with torch.no_grad():
        theirs = hf(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels)
        for model in (reference.eval(), fast.eval()):
            ours = model(ids, mask, types, masked)
            assert ours.shape == (int(masked.sum()), CONFIG["vocab_size"])
            assert (ours - theirs.logits[masked]).abs().max() <= FP32_TOL
            everywhere = model(ids, mask, types)                                    # (B, T, V)
            real = mask.bool()
            assert (everywhere[real] - theirs.logits[real]).abs().max() <= FP32_TOL
            out = model.compute_loss(ids, mask, labels, types)
            assert abs(out.loss.item() - theirs.loss.item()) <= FP32_TOL
            assert out.count == int(masked.sum())
            assert out.correct == (theirs.logits[masked].argmax(-1) == labels[masked]).sum()


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_fast_training_loss_and_every_gradient_match_the_reference(precision):
    """In training the fast path fuses the decoder with the loss; the tied embeddings' gradient sums the lookup's
    rows (fast.py's kept buffer) and the decoder's."""
    reference, fast = models()
    ids, mask, types, labels = batch()
    outputs = []
    for model in (reference.train(), fast.train()):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            out = model.compute_loss(ids, mask, labels, types)
        out.loss.backward()
        outputs.append(out)
    tol = FP32_TOL if precision == "fp32" else 0.02
    assert abs(outputs[0].loss.item() - outputs[1].loss.item()) <= tol * 5
    assert outputs[0].count == outputs[1].count
    if precision == "fp32":
        assert outputs[0].correct == outputs[1].correct
    grads = dict(fast.named_parameters())
    for name, p in reference.named_parameters():
        if p.grad is None:
            assert name.startswith("bert.pooler.") and grads[name].grad is None
            continue
        if name.endswith("key.bias"):  # softmax ignores a constant added to every key's score: zero but rounding
            assert p.grad.abs().max() < 1e-3 and grads[name].grad.abs().max() < 1e-3
            continue
        assert (p.grad - grads[name].grad).abs().max().item() <= tol * p.grad.abs().max().item(), name


def test_nothing_masked_is_a_zero_loss_with_a_graph():
    reference, fast = models()
    ids, mask, types, _ = batch()
    for model in (reference.train(), fast.train()):
        out = model.compute_loss(ids, mask, torch.full_like(ids, IGNORE_INDEX), types)
        out.loss.backward()
        assert out.count == 0 and out.loss.item() == 0.0


@pytest.mark.parametrize("optimizer", ["minbert", "torch"])
def test_tied_weights_stay_tied_after_an_optimizer_step(optimizer):
    _, model = models()
    make = minbert.AdamW if optimizer == "minbert" else torch.optim.AdamW
    opt = make([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    embeddings = model.bert.embeddings.word_embeddings.weight
    before = embeddings.detach().clone()
    ids, mask, types, labels = batch()
    for _ in range(2):
        opt.zero_grad()
        model.train().compute_loss(ids, mask, labels, types).loss.backward()
        opt.step()
    head = model.cls.predictions
    assert head.decoder.weight is embeddings and head.decoder.bias is head.bias
    assert not torch.equal(before, embeddings) and torch.equal(model.state_dict()["cls.predictions.decoder.weight"],
                                                               embeddings)
    assert model.bert.pooler.dense.weight.grad is None  # not trained by MLM: frozen


def write_vocab(folder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True, "model_max_length": 64}))
    return folder


def export(model, folder, tokenizer_folder):
    def write_bytes(path, data):
        path.write_bytes(data)
        return path
    save_pretrained(model, folder, tokenizer_folder, write_bytes)
    return folder


def test_export_loads_in_transformers_fill_mask_and_back_here(tmp_path):
    import transformers
    reference, _ = models()
    folder = export(reference, tmp_path / "out", write_vocab(tmp_path / "tok"))
    assert json.loads((folder / "config.json").read_text())["architectures"] == ["BertForMaskedLM"]
    ids, mask, types, labels = batch()
    masked = labels != IGNORE_INDEX
    hf = transformers.BertForMaskedLM.from_pretrained(folder).eval()
    assert hf.cls.predictions.decoder.weight is hf.bert.embeddings.word_embeddings.weight
    with torch.no_grad():
        want = reference.eval()(ids, mask, types, masked)
        assert (hf(input_ids=ids, attention_mask=mask, token_type_ids=types).logits[masked] - want).abs().max() \
            <= FP32_TOL
        fill = transformers.pipeline("fill-mask", model=str(folder), top_k=3)
        predictions = fill("the cat [MASK] on the mat .")
        assert len(predictions) == 3 and all(p["token_str"] for p in predictions)
        back = minbert.mlm_from_pretrained(str(folder), implementation="reference")
        assert back.source.initialised_tensors == []
        assert back.cls.predictions.decoder.weight is back.bert.embeddings.word_embeddings.weight
        assert torch.equal(back(ids, mask, types, masked), want)
        encoder = minbert.from_pretrained(str(folder))  # `--model FOLDER` in every command
        assert torch.equal(encoder.embeddings.word_embeddings.weight, reference.bert.embeddings.word_embeddings.weight)


def test_checkpoint_without_head_is_initialised_with_head_loaded_exactly(tmp_path):
    reference, _ = models()
    encoder_only = tmp_path / "encoder"
    export(reference.bert, encoder_only, write_vocab(tmp_path / "tok"))
    model = minbert.mlm_from_pretrained(str(encoder_only))
    head = model.cls.predictions
    assert sorted(model.source.initialised_tensors) == sorted(
        f"cls.predictions.{k}" for k in ("bias", "transform.dense.weight", "transform.dense.bias",
                                         "transform.LayerNorm.weight", "transform.LayerNorm.bias"))
    assert torch.equal(head.bias, torch.zeros_like(head.bias)) and torch.equal(head.transform.dense.bias,
                                                                                torch.zeros(32))
    assert torch.equal(head.transform.LayerNorm.weight, torch.ones(32))
    assert 0.5 * CONFIG["initializer_range"] < head.transform.dense.weight.std() < 1.1 * CONFIG["initializer_range"]
    assert torch.equal(model.bert.embeddings.word_embeddings.weight, reference.bert.embeddings.word_embeddings.weight)
    # transformers' own BertForMaskedLM folder: `bert.` keys, the head, no pooler
    hf = hf_model(reference)
    hf.save_pretrained(tmp_path / "hf")
    write_vocab(tmp_path / "hf")
    loaded = minbert.mlm_from_pretrained(str(tmp_path / "hf"))
    assert loaded.source.initialised_tensors == ["bert.pooler.dense.weight", "bert.pooler.dense.bias"]
    ours = reference.state_dict()
    for key, tensor in loaded.state_dict().items():
        if not key.startswith("bert.pooler."):
            assert torch.equal(tensor, ours[key]), key
    encoder = minbert.from_pretrained(str(tmp_path / "hf"))  # as --model: the pooler drawn, said in .source
    assert encoder.source.initialised_tensors == ["pooler.dense.weight", "pooler.dense.bias"]
    assert torch.equal(encoder.embeddings.word_embeddings.weight, ours["bert.embeddings.word_embeddings.weight"])


def test_a_head_with_a_wrong_shape_or_a_missing_tensor_is_named(tmp_path):
    from safetensors.torch import load_file, save_file
    reference, _ = models()
    folder = export(reference, tmp_path / "out", write_vocab(tmp_path / "tok"))
    state = load_file(folder / "model.safetensors")
    save_file({k: v for k, v in state.items() if k != "cls.predictions.transform.dense.bias"},
              folder / "model.safetensors")
    with pytest.raises(CheckpointError, match="transform.dense.bias"):
        minbert.mlm_from_pretrained(str(folder))
    save_file({**state, "cls.predictions.bias": torch.zeros(7)}, folder / "model.safetensors")
    with pytest.raises(CheckpointError, match="cls.predictions.bias.*shape"):
        minbert.mlm_from_pretrained(str(folder))


def test_the_embedded_model_gets_a_new_head_on_its_encoder(pretrained):
    model = minbert.mlm_from_pretrained("minilm")
    assert "cls.predictions.bias" in model.source.initialised_tensors
    encoder = model.bert.state_dict()
    for key, tensor in pretrained.state_dict().items():
        assert torch.equal(encoder[key], tensor), key


def test_an_optimizer_step_drops_the_heads_cast_evaluation_weights():
    """Fused AdamW bumps no version counter: `watch_optimizer` must reach the head's layers too."""
    _, model = models()
    ids, mask, types, labels = batch()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2, fused=True)
    model.watch_optimizer(opt)
    masked = labels != IGNORE_INDEX

    def evaluate():
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            return model.eval()(ids, mask, types, masked).float()
    before = evaluate()
    assert "_eval_weights" in vars(model.cls.predictions.decoder)
    for p in opt.param_groups[0]["params"]:  # gradients from elsewhere: no train(), no forward in between
        p.grad = torch.randn_like(p)
    opt.step()
    assert not [name for name, m in model.named_modules() if "_eval_weights" in vars(m)]
    assert not torch.equal(before, evaluate())
