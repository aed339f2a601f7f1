"""Checkpoint resolution and the strict loader: every failure is one line naming the file or tensor."""
import json
import pickle
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

import minbert
from minbert import CheckpointError


@pytest.fixture()
def ckpt(tmp_path, pretrained):
    """A writable copy of the embedded checkpoint."""
    src = minbert.resolve("minilm")[0]
    dst = tmp_path / "ckpt"
    dst.mkdir()
    for name in ("config.json", "vocab.txt", "tokenizer_config.json", "model.safetensors"):
        shutil.copy(src / name, dst / name)
    return dst


def _one_line(err) -> str:
    msg = str(err.value)
    assert "\n" not in msg
    return msg


def test_loads_local_folder_and_records_source(ckpt):
    model = minbert.from_pretrained(str(ckpt))
    assert model.source.resolved_from == "local"
    assert model.source.num_layers == model.num_layers == 6
    assert len(model.source.weights_sha256) == 64
    assert model.source.ignored_tensors == ["embeddings.position_ids"]


@pytest.mark.parametrize("missing", ["config.json", "model.safetensors", "vocab.txt"])
def test_folder_missing_a_file(ckpt, missing):
    (ckpt / missing).unlink()
    with pytest.raises(CheckpointError) as err:
        minbert.from_pretrained(str(ckpt))
    assert str(ckpt) in _one_line(err)


def test_truncated_weights_file(ckpt):
    data = (ckpt / "model.safetensors").read_bytes()
    (ckpt / "model.safetensors").write_bytes(data[: len(data) // 3])
    with pytest.raises(CheckpointError) as err:
        minbert.from_pretrained(str(ckpt))
    assert "model.safetensors" in _one_line(err)


def test_wrong_shaped_tensor_is_named(ckpt):
    state = load_file(str(ckpt / "model.safetensors"))
    state["encoder.layer.2.attention.self.key.weight"] = torch.zeros(10, 10)
    save_file(state, str(ckpt / "model.safetensors"))
    with pytest.raises(CheckpointError) as err:
        minbert.from_pretrained(str(ckpt))
    assert "encoder.layer.2.attention.self.key.weight" in _one_line(err)


def test_unexpected_and_missing_tensors_are_named(ckpt):
    state = load_file(str(ckpt / "model.safetensors"))
    state["encoder.layer.0.surprise.weight"] = torch.zeros(3)
    save_file(state, str(ckpt / "model.safetensors"))
    with pytest.raises(CheckpointError) as err:
        minbert.from_pretrained(str(ckpt))
    assert "encoder.layer.0.surprise.weight" in _one_line(err)
    del state["encoder.layer.0.surprise.weight"], state["pooler.dense.bias"]
    save_file(state, str(ckpt / "model.safetensors"))
    with pytest.raises(CheckpointError) as err:
        minbert.from_pretrained(str(ckpt))
    assert "pooler.dense.bias" in _one_line(err)


def test_bertfor_prefix_gamma_beta_and_heads_are_mapped(ckpt, pretrained):
    """A BertForPreTraining-style pytorch_model.bin: `bert.` prefix, gamma/beta, a `cls.` head."""
    state = load_file(str(ckpt / "model.safetensors"))
    old = {}
    for k, v in state.items():
        k = k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        old["bert." + k] = v
    old["cls.predictions.bias"] = torch.zeros(30522)
    (ckpt / "model.safetensors").unlink()
    torch.save(old, ckpt / "pytorch_model.bin")
    model = minbert.from_pretrained(str(ckpt))
    assert "cls.predictions.bias" in model.source.ignored_tensors
    for (k, a), b in zip(model.state_dict().items(), pretrained.state_dict().values(), strict=True):
        assert torch.equal(a, b), k


class _Boom:
    def __reduce__(self):
        import os
        return (os.system, ("echo pwned > /tmp/minbert-pwned",))


def test_pickle_that_runs_code_is_refused(ckpt, tmp_path):
    (ckpt / "model.safetensors").unlink()
    with open(ckpt / "pytorch_model.bin", "wb") as f:
        pickle.dump({"x": _Boom()}, f)
    with pytest.raises(CheckpointError) as err:
        minbert.from_pretrained(str(ckpt))
    assert "pytorch_model.bin" in _one_line(err)
    import os
    assert not os.path.exists("/tmp/minbert-pwned")


def test_size_generic_config(tmp_path):
    """Nothing is tied to 12 x 768 or 6 x 384: a 3 x 96 model builds and runs from its config."""
    cfg = dict(vocab_size=100, hidden_size=96, num_hidden_layers=3, num_attention_heads=4,
               intermediate_size=128, max_position_embeddings=64)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    config = minbert.BertConfig.from_json(tmp_path / "config.json")
    model = minbert.build_model(config)
    out = model(torch.randint(0, 100, (2, 7)), torch.ones(2, 7, dtype=torch.long))
    assert out.last_hidden_state.shape == (2, 7, 96) and model.num_layers == 3


def test_explicit_unavailable_model_is_an_error_not_a_fallback(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CheckpointError) as err:
        minbert.from_pretrained("no-such-org/no-such-model")
    assert "no-such-org/no-such-model" in _one_line(err)


def test_default_model_falls_back_to_embedded_with_one_warning(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    folder, how = minbert.resolve("bert-base-uncased", fallback_to_embedded=True)
    assert how == "embedded" and (folder / "model.safetensors").exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning:") and "bert-base-uncased" in err[0]


def test_offline_resolution_fails_fast(monkeypatch, tmp_path):
    import time
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    start = time.monotonic()
    with pytest.raises(CheckpointError):
        minbert.resolve("bert-base-uncased")
    assert time.monotonic() - start < 30
