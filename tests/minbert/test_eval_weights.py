"""bf16 evaluation casts the weights once, not per batch, and must still equal per-batch casting bit for bit."""
import copy

import torch

import minbert


def _hidden(model, batch):
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        return model(**batch).last_hidden_state


def _uncached(model, batch):
    """The same weights evaluated the plain autocast way (train mode, no dropout: no reuse)."""
    return _hidden(minbert.set_dropout(copy.deepcopy(model), 0.0).train(), batch)


def _train_and_step(model, batch, optimizer):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model(**batch).last_hidden_state.float().pow(2).mean().backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def test_cast_weights_are_reused_and_follow_every_change(pretrained, tokenizer):
    model = copy.deepcopy(pretrained).eval()
    batch = tokenizer.collate(tokenizer.encode(["a short one", "a longer sentence about a film and its actors", "hi"]))
    first = _hidden(model, batch)
    attention = model.encoder.layer[0].attention.self
    cached = attention.__dict__["_eval_weights"][1][0]
    assert torch.equal(first, _hidden(model, batch)) and torch.equal(first, _uncached(model, batch))
    assert attention.__dict__["_eval_weights"][1][0] is cached  # reused, not re-cast
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)  # does not bump version counters
    model.train()
    assert "_eval_weights" not in attention.__dict__  # dropped on leaving eval mode
    _train_and_step(model, batch, optimizer)
    model.eval()
    after_step = _hidden(model, batch)
    assert not torch.equal(after_step, first) and torch.equal(after_step, _uncached(model, batch))
    _train_and_step(model, batch, optimizer)  # a step taken in eval mode (its forward drops the cache)
    assert torch.equal(_hidden(model, batch), _uncached(model, batch))
    model.watch_optimizer(optimizer)  # what the trainer asks of its encoder
    for p in model.parameters():  # a step with no forward of this model since the last evaluation
        p.grad = torch.full_like(p, 1e-3)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    assert "_eval_weights" not in attention.__dict__
    assert torch.equal(_hidden(model, batch), _uncached(model, batch))
    with torch.no_grad():
        model.encoder.layer[1].output.dense.weight.mul_(0.5)  # surgery-style in-place edit
    assert torch.equal(_hidden(model, batch), _uncached(model, batch))
    minilm = minbert.from_pretrained("minilm").eval()
    model.load_state_dict(minilm.state_dict())
    assert torch.equal(_hidden(model, batch), first)


def test_a_model_loaded_in_inference_mode_evaluates_in_bf16(pretrained, tokenizer):
    """predict.py loads and runs its model under torch.inference_mode(): weights without version counters."""
    batch = tokenizer.collate(tokenizer.encode(["a short one", "a longer sentence about a film", "hi"]))
    expected = _hidden(copy.deepcopy(pretrained).eval(), batch)
    with torch.inference_mode():
        model = minbert.from_pretrained(str(pretrained.source.folder)).eval()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            got = model(**batch).last_hidden_state
            again = model(**batch).last_hidden_state
    assert torch.equal(got, expected) and torch.equal(again, expected)
