"""minBERT against Hugging Face transformers on the same checkpoint (fp32, eval mode)."""
import csv

import pytest
import torch

transformers = pytest.importorskip("transformers")


def _sentences(data_dir, n=24):
    with open(data_dir / "ids-sst-dev.csv", encoding="utf-8") as f:
        sst = [r["sentence"].strip() for r in csv.DictReader(f, delimiter="\t")][:n]
    with open(data_dir / "sts-dev.csv", encoding="utf-8") as f:
        sts = [(r["sentence1"], r["sentence2"]) for r in csv.DictReader(f, delimiter="\t")][:n]
    return sst, sts


@pytest.fixture(scope="module")
def reference(pretrained):
    return transformers.BertModel.from_pretrained(pretrained.source.folder,
                                                  attn_implementation="eager").eval()


def _max_diff_on_tokens(a, b, mask):
    """Outputs at padding positions are meaningless (and differ between HF's own kernels)."""
    return ((a - b).abs() * mask[..., None]).max().item()


@pytest.mark.parametrize("kind", ["single", "pair", "mixed"])
def test_hidden_states_and_pooler_match_transformers(pretrained, reference, tokenizer, data_dir, kind):
    sst, sts = _sentences(data_dir)
    if kind == "single":
        batch = tokenizer(sst)
    elif kind == "pair":
        batch = tokenizer([a for a, _ in sts], [b for _, b in sts])
    else:  # singles and pairs in one padded batch
        enc = tokenizer.encode(sst[:12]) + tokenizer.encode([a for a, _ in sts[:12]], [b for _, b in sts[:12]])
        batch = tokenizer.collate(enc)
    assert (batch["attention_mask"] == 0).any(), "the batch must contain padding"
    with torch.no_grad():
        ours = pretrained(**batch, output_hidden_states=True)
        ref = reference(**batch, output_hidden_states=True)
    mask = batch["attention_mask"]
    assert _max_diff_on_tokens(ours.last_hidden_state, ref.last_hidden_state, mask) <= 1e-5
    assert (ours.pooler_output - ref.pooler_output).abs().max().item() <= 1e-5
    for mine, theirs in zip(ours.hidden_states, ref.hidden_states, strict=True):
        assert _max_diff_on_tokens(mine, theirs, mask) <= 1e-5


def test_attention_path_matches_fast_path_and_reference(pretrained, reference, tokenizer, data_dir):
    sst, _ = _sentences(data_dir, 8)
    batch = tokenizer(sst)
    with torch.no_grad():
        fast = pretrained(**batch)
        explicit = pretrained(**batch, output_attentions=True)
        ref = reference(**batch, output_attentions=True)
    mask = batch["attention_mask"]
    assert _max_diff_on_tokens(fast.last_hidden_state, explicit.last_hidden_state, mask) <= 1e-5
    for mine, theirs in zip(explicit.attentions, ref.attentions, strict=True):
        real = mask[:, None, :, None] * mask[:, None, None, :]
        assert ((mine - theirs).abs() * real).max().item() <= 1e-5


def test_attention_probabilities_sum_to_one_and_ignore_padding(pretrained, tokenizer):
    batch = tokenizer(["a short one", "a somewhat longer sentence with more tokens in it"])
    with torch.no_grad():
        out = pretrained(**batch, output_attentions=True)
    assert len(out.attentions) == pretrained.num_layers
    pad_keys = batch["attention_mask"][:, None, None, :] == 0
    for probs in out.attentions:
        assert torch.allclose(probs.sum(-1), torch.ones(()), atol=1e-5)
        assert probs.masked_select(pad_keys.expand_as(probs)).abs().max().item() == 0.0


def test_no_padding_batch_gives_same_outputs_as_padded(pretrained, tokenizer):
    """The fast path drops the mask when a batch has no padding; the result must not change."""
    alone = tokenizer(["the same sentence"])
    padded = tokenizer(["the same sentence", "and a much longer companion sentence here"])
    with torch.no_grad():
        a = pretrained(**alone).last_hidden_state[0]
        b = pretrained(**padded).last_hidden_state[0, : a.shape[0]]
    assert (a - b).abs().max().item() <= 1e-5
