"""The fast path (minbert/fast.py) held to the reference BERT (minbert/model.py).

Small random models with the same weights in both implementations, batches with varied
padding: outputs, every parameter's gradient and the attention probabilities must agree
within float32 rounding; the dropout kernel must drop at rate p and scale kept values by
1 / (1 - p). Also: importing the library changes nothing process-wide; the reference imports
nothing of the fast path; `build_model` alone chooses; the training hooks.
"""
import ast
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import minbert
from minbert import fast, fast_layers
from minbert.fast import FastBertModel, TokenLayout
from tests.helpers.fast_path import BF16_TOL, CONFIG, FP32_TOL, LENGTHS, make_batch, max_diff_on_tokens, models

REPO = Path(__file__).resolve().parents[2]


def loss_of(out, mask):
    g = torch.Generator().manual_seed(2)
    w = torch.randn(out.last_hidden_state.shape, generator=g)
    return (out.last_hidden_state * w * mask[..., None]).sum() / mask.sum() + out.pooler_output.pow(2).mean()


@pytest.mark.parametrize("case", LENGTHS)
@pytest.mark.parametrize("attentions", [False, True], ids=["sdpa", "written-out"])
def test_outputs_and_every_gradient_match_the_reference(case, attentions):
    reference, fast_model = models()
    batch = make_batch(*LENGTHS[case])
    mask = batch["attention_mask"]
    grads, outs = [], []
    for model in (reference, fast_model):
        model.train()
        out = model(**batch, output_hidden_states=True, output_attentions=attentions)
        loss_of(out, mask).backward()
        outs.append(out)
        grads.append({name: p.grad for name, p in model.named_parameters()})
    ref, got = outs
    assert max_diff_on_tokens(ref.last_hidden_state, got.last_hidden_state, mask) <= FP32_TOL
    assert (ref.pooler_output - got.pooler_output).abs().max().item() <= FP32_TOL
    for a, b in zip(ref.hidden_states, got.hidden_states, strict=True):
        assert max_diff_on_tokens(a, b, mask) <= FP32_TOL
    assert grads[0].keys() == grads[1].keys()
    for name, g in grads[0].items():
        assert (g - grads[1][name]).abs().max().item() <= FP32_TOL, name


def test_several_blocks_case_really_regroups():
    lengths, seq = LENGTHS["several-blocks"]
    layout = TokenLayout(len(lengths), seq, make_batch(lengths, seq)["attention_mask"])
    assert len(layout.blocks) > 1


def test_one_block_per_length_and_inputs_embeds(monkeypatch):
    """BLOCK_OVERHEAD 0: every distinct length its own block; SMART's inputs_embeds instead of ids."""
    monkeypatch.setattr(fast, "BLOCK_OVERHEAD", 0)
    reference, fast_model = models()
    batch = make_batch(*LENGTHS["mixed"])
    embeds = reference.embeddings.word_embeddings(batch.pop("input_ids")).detach()
    mask = batch["attention_mask"]
    assert len(TokenLayout(*mask.shape, mask).blocks) == len(set(LENGTHS["mixed"][0]))
    ref, got = (m.train()(inputs_embeds=embeds, **batch) for m in (reference, fast_model))
    assert max_diff_on_tokens(ref.last_hidden_state, got.last_hidden_state, mask) <= FP32_TOL


def test_written_out_attention_in_training_matches(monkeypatch):
    """Attention dropout makes the fast path write attention out on its blocks; p = 1e-9 rounds to no
    dropping at all in float32 (1 / (1 - 1e-9) == 1), so both implementations must agree."""
    reference, fast_model = models(attention_probs_dropout_prob=1e-9)
    batch = make_batch(*LENGTHS["several-blocks"])
    mask = batch["attention_mask"]
    calls = []
    monkeypatch.setattr(fast, "attend", lambda *a, real=fast.attend: calls.append(1) or real(*a))
    grads = []
    for model in (reference, fast_model):
        loss_of(model.train()(**batch), mask).backward()
        grads.append({name: p.grad for name, p in model.named_parameters()})
    assert calls, "the written-out attention was not used"
    for name, g in grads[0].items():
        assert (g - grads[1][name]).abs().max().item() <= FP32_TOL, name


@pytest.mark.parametrize("case", ["mixed", "several-blocks"])
def test_attention_probabilities_match_the_reference(case):
    reference, fast_model = models()
    batch = make_batch(*LENGTHS[case])
    mask = batch["attention_mask"]
    with torch.no_grad():
        ref, got = (m.eval()(**batch, output_attentions=True) for m in (reference, fast_model))
    real_queries = mask[:, None, :, None].bool()
    for a, b in zip(ref.attentions, got.attentions, strict=True):
        assert a.shape == b.shape == (mask.shape[0], CONFIG["num_attention_heads"], mask.shape[1], mask.shape[1])
        assert ((a - b).abs() * real_queries).max().item() <= FP32_TOL
        assert b.masked_select(~mask[:, None, None, :].bool()).abs().max().item() == 0.0  # no weight on padding


def test_without_attention_mask_both_see_every_token():
    reference, fast_model = models()
    ids = make_batch(*LENGTHS["no-padding"])["input_ids"]
    with torch.no_grad():
        ref, got = (m.eval()(ids) for m in (reference, fast_model))
    assert (ref.last_hidden_state - got.last_hidden_state).abs().max().item() <= FP32_TOL


@pytest.mark.parametrize("train", [False, True], ids=["eval-cast-weights", "train"])
def test_bf16_autocast_outputs_are_close(train):
    reference, fast_model = models()
    batch = make_batch(*LENGTHS["several-blocks"])
    mask = batch["attention_mask"]
    with torch.set_grad_enabled(train), torch.autocast("cpu", dtype=torch.bfloat16):
        ref, got = (m.train(train)(**batch) for m in (reference, fast_model))
    assert max_diff_on_tokens(ref.last_hidden_state.float(), got.last_hidden_state.float(), mask) <= BF16_TOL
    assert (ref.pooler_output.float() - got.pooler_output.float()).abs().max().item() <= BF16_TOL


def _plain_regroup(x, index, back, live, dead):
    return x.index_select(0, index)


PADDED = {**{k: v for k, v in LENGTHS.items() if k != "no-padding"}, "an-empty-sequence": ([5, 0, 3, 1], 6)}


@pytest.mark.parametrize("case", PADDED)
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("attention", ["sdpa", "written-out", "probabilities"])
def test_gathering_backward_of_the_layout_moves_is_autograds_exactly(monkeypatch, case, precision, attention):
    """_Regroup's gather backward against autograd's index_add_ backward of the same index_select:
    bitwise, since the rows it leaves out carry exactly zero gradient. "probabilities" returns them
    (the layout that is not regrouped) and puts them in the loss."""
    dropout = 0.1 if attention == "written-out" else 0.0
    _, fast_model = models(attention_probs_dropout_prob=dropout, hidden_dropout_prob=0.1)
    batch = make_batch(*PADDED[case])
    calls, grads = [], []
    counted = lambda *a, real=fast._Regroup.apply: calls.append(1) or real(*a)  # noqa: E731
    for regroup in (counted, _plain_regroup):
        monkeypatch.setattr(fast._Regroup, "apply", regroup)
        fast_model.zero_grad(set_to_none=True)
        torch.manual_seed(5)  # the same dropout masks
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            out = fast_model.train()(**batch, output_attentions=attention == "probabilities")
        loss = loss_of(out, batch["attention_mask"]).float()
        if attention == "probabilities":
            loss = loss + sum(p.float().pow(2).sum() for p in out.attentions)
        loss.backward()
        grads.append({name: p.grad.clone() for name, p in fast_model.named_parameters()})
    assert calls, "the gather backward was not used"
    for name, g in grads[0].items():
        assert torch.equal(g, grads[1][name]), name


def test_written_out_attention_in_bf16_training_is_close(monkeypatch):
    """Under bf16 autocast the written-out attention (float32 inside) stays close to the reference."""
    reference, fast_model = models(attention_probs_dropout_prob=1e-9)
    batch = make_batch(*LENGTHS["several-blocks"])
    mask = batch["attention_mask"]
    calls = []
    monkeypatch.setattr(fast, "attend", lambda *a, real=fast.attend: calls.append(a[0].dtype) or real(*a))
    grads, outs = [], []
    for model in (reference, fast_model):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model.train()(**batch)
        loss_of(out, mask).float().backward()
        outs.append(out.last_hidden_state.float())
        grads.append({name: p.grad for name, p in model.named_parameters()})
    assert calls and set(calls) == {torch.bfloat16}
    assert max_diff_on_tokens(*outs, mask) <= BF16_TOL
    # Relative to each gradient's size, with a floor: the key bias's gradient is zero but for rounding
    # (softmax ignores a shift shared by all keys).
    floor = 1e-2 * max(g.norm().item() for g in grads[0].values())
    for name, g in grads[0].items():
        assert (g - grads[1][name]).norm().item() <= BF16_TOL * max(g.norm().item(), floor), name


# ------------------------------------------------------------------------------------ dropout kernel

@pytest.mark.parametrize("p", [0.02, 0.1, 0.5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_drops_at_rate_p_and_scales_kept_values(p, dtype):
    n = 1 << 20
    torch.manual_seed(0)
    x = torch.ones(n, dtype=dtype, requires_grad=True)
    out = fast_layers.dropout(x, p, training=True)
    out.float().sum().backward()
    dropped = out == 0
    # Five binomial standard deviations: a correct kernel fails this once in ~3.5 million seeds.
    tol = 5 * math.sqrt(p * (1 - p) / n)
    assert abs(dropped.float().mean().item() - p) <= tol
    for lane in range(4):  # each 16-bit quarter of a 64-bit draw is a uniform of its own
        assert abs(dropped[lane::4].float().mean().item() - p) <= 2 * tol
    scale = torch.tensor(1 / (1 - p)).to(dtype)  # dtype rounding only: P(drop) is p to 2**-17
    assert torch.allclose(out[~dropped], scale, rtol=1e-5, atol=0)
    assert torch.equal(x.grad, out.detach())  # backward: the same mask and scale (x is ones)


def test_dropout_is_identity_when_off_and_seeded():
    x = torch.randn(1000)
    assert fast_layers.dropout(x, 0.1, training=False) is x and fast_layers.dropout(x, 0.0, training=True) is x
    torch.manual_seed(3)
    a = fast_layers.dropout(x, 0.1, training=True)
    torch.manual_seed(3)
    assert torch.equal(a, fast_layers.dropout(x, 0.1, training=True))


# ------------------------------------------------------------------------------------ selection

def test_implementation_is_chosen_by_config_and_from_pretrained():
    assert minbert.BertConfig().implementation == minbert.DEFAULT_IMPLEMENTATION == "auto"  # on a CPU: fast
    assert type(minbert.build_model(minbert.BertConfig(**CONFIG))) is FastBertModel
    with pytest.raises(minbert.CheckpointError, match="implementation"):
        minbert.BertConfig(implementation="turbo")
    reference = minbert.from_pretrained("minilm", implementation="reference")
    assert type(reference) is minbert.BertModel and reference.config.implementation == "reference"
    assert type(minbert.from_pretrained("minilm")) is FastBertModel


def test_pretrained_reference_matches_the_fast_path(pretrained, tokenizer):
    reference = minbert.from_pretrained("minilm", implementation="reference")
    batch = tokenizer(["a short one", "a somewhat longer sentence with more tokens in it", "hi"])
    with torch.no_grad():
        ref, got = reference(**batch), pretrained(**batch)
    assert max_diff_on_tokens(ref.last_hidden_state, got.last_hidden_state, batch["attention_mask"]) <= FP32_TOL


# ------------------------------------------------------------------------------ process-wide effects

IMPORT_CHECK = r"""
import glob, os, sys
umask_calls = []
real_umask = os.umask
os.umask = lambda mask: umask_calls.append(mask) or real_umask(mask)
import torch
from torch.optim import optimizer
env = dict(os.environ)
hooks = (dict(optimizer._global_optimizer_pre_hooks), dict(optimizer._global_optimizer_post_hooks))
import minbert, minbert.analysis, minbert.fast
for path in sorted(glob.glob("tasks/**/*.py", recursive=True)):
    name = path[:-3].replace(os.sep, ".").removesuffix(".__init__")
    if name != "tasks.openmp":  # the entry points' own setting of OMP_WAIT_POLICY, imported by them alone
        __import__(name)
model = minbert.build_model(minbert.BertConfig(num_hidden_layers=1, hidden_size=32, num_attention_heads=2))
assert dict(os.environ) == env, set(os.environ.items()) ^ set(env.items())
assert (dict(optimizer._global_optimizer_pre_hooks), dict(optimizer._global_optimizer_post_hooks)) == hooks
assert umask_calls == [], umask_calls
"""

ENTRY_POINT_CHECK = r"""
import os, sys
seen = []
class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" and not seen:
            seen.append(os.environ.get("OMP_WAIT_POLICY"))
sys.meta_path.insert(0, Spy())
import {module}
assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
assert seen in ([], ["PASSIVE"]), seen
"""


def _python(code):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


def test_importing_the_library_sets_no_environment_hook_or_umask():
    _python(IMPORT_CHECK)


@pytest.mark.parametrize("module", ["train_multitask", "classifier", "ablate", "reproduce", "predict",
                                    "bench.throughput", "bench.trainer"])
def test_entry_points_set_the_openmp_wait_policy_before_torch_loads(module):
    _python(ENTRY_POINT_CHECK.replace("{module}", module))


# ------------------------------------------------------------------------- one way, and the hooks

def test_build_model_alone_chooses_and_the_choice_draws_nothing():
    """`build_model` follows `config.implementation`; `BertModel(config)` is the reference whatever the
    config says. From the same seed all three start with the same weights."""
    built = {}
    for implementation in ("fast", "reference"):
        torch.manual_seed(0)
        built[implementation] = minbert.build_model(minbert.BertConfig(**CONFIG, implementation=implementation))
    torch.manual_seed(0)
    plain = minbert.BertModel(minbert.BertConfig(**CONFIG))  # implementation "auto", the default
    assert type(built["fast"]) is FastBertModel
    fast_classes = tuple(fast.FAST_CLASSES.values())
    for model in (built["reference"], plain):
        assert type(model) is minbert.BertModel
        assert not [m for m in model.modules() if isinstance(m, fast_classes)]
    for model in built.values():
        assert model.state_dict().keys() == plain.state_dict().keys()
        for name, tensor in plain.state_dict().items():
            assert torch.equal(model.state_dict()[name], tensor), name


def test_the_reference_imports_nothing_but_its_config():
    """model.py, read: no import of the fast path anywhere in it, not even inside a function."""
    tree = ast.parse((REPO / "minbert" / "model.py").read_text())
    relative = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level}
    absolute = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    absolute |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and not node.level}
    assert relative == {"config"}
    assert not [name for name in absolute if name.split(".")[0] == "minbert"]


REFERENCE_ALONE = r"""
import sys, types
import torch
package = types.ModuleType("minbert")  # an empty package: minbert/__init__.py would import every module
package.__path__ = ["minbert"]
sys.modules["minbert"] = package
from minbert.config import BertConfig
from minbert.model import BertModel
model = BertModel(BertConfig(num_hidden_layers=1, hidden_size=32, num_attention_heads=2))
assert model.config.implementation == "auto" and type(model) is BertModel
model.train()(torch.randint(1, 100, (2, 5)), torch.tensor([[1] * 5, [1, 1, 0, 0, 0]])).pooler_output.sum().backward()
assert model.watch_optimizer(torch.optim.SGD(model.parameters())) is None and model.prepare_for_data_parallel() is model
loaded = sorted(name for name in sys.modules if name.startswith("minbert."))
assert loaded == ["minbert.config", "minbert.errors", "minbert.model"], loaded
"""


def test_the_reference_runs_without_the_fast_path_loaded():
    """model.py imported on its own, a model built, trained a step, given its hooks: minbert.fast never loads."""
    _python(REFERENCE_ALONE)


def _module_attributes(model):
    return {name: (type(m), sorted(vars(m))) for name, m in model.named_modules()}


def test_training_hooks_do_nothing_on_the_reference():
    reference, _ = models()
    before = _module_attributes(reference)
    optimizer = torch.optim.AdamW(reference.parameters())
    assert reference.watch_optimizer(optimizer) is None and not optimizer._optimizer_step_post_hooks
    assert reference.prepare_for_data_parallel() is reference
    assert _module_attributes(reference) == before


def _holding_cast_weights(model):
    return [name for name, m in model.named_modules() if "_eval_weights" in vars(m)]


def test_training_hooks_of_the_fast_path():
    """watch_optimizer: every step drops the cast evaluation weights, until its handle is removed.
    prepare_for_data_parallel: every embedding gradient comes through autograd, into no kept buffer."""
    reference, fast_model = models()
    batch = make_batch(*LENGTHS["mixed"])
    optimizer = torch.optim.SGD(fast_model.parameters(), lr=0.0)

    def evaluate():
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            fast_model.eval()(**batch)
        return _holding_cast_weights(fast_model)

    handle = fast_model.watch_optimizer(optimizer)
    assert evaluate()
    optimizer.step()
    assert _holding_cast_weights(fast_model) == []
    cached = evaluate()
    handle.remove()
    optimizer.step()
    assert _holding_cast_weights(fast_model) == cached

    tables = [m for m in fast_model.modules() if isinstance(m, fast_layers.FastEmbedding)]
    assert len(tables) == 3 and all(table.rows_backward for table in tables)
    assert fast_model.prepare_for_data_parallel() is fast_model
    assert not any(table.rows_backward for table in tables)
    for model in (reference, fast_model):
        loss_of(model.train()(**batch), batch["attention_mask"]).backward()
    assert not [table for table in tables if "_grad_buffer" in vars(table)]
    for name, p in reference.named_parameters():
        assert (p.grad - fast_model.get_parameter(name).grad).abs().max().item() <= FP32_TOL, name


@pytest.mark.parametrize("task_heads, pair_mode", [("default", "cross"), ("default", "siamese"),
                                                   ("report", "siamese")])
def test_the_encoders_hooks_cover_a_multitask_model(task_heads, pair_mode):
    """The trainer gives the hooks the encoder alone: nothing else of a MultitaskModel is of the fast
    path, so nothing else keeps cast weights or adds embedding rows into a gradient."""
    from tasks.heads import MultitaskModel
    _, encoder = models()
    tasks = ("sst", "sts") if task_heads == "report" else ("sst", "quora", "sts")
    model = MultitaskModel(encoder, tasks, pair_mode=pair_mode, task_heads=task_heads)
    inside = {id(m) for m in model.encoder.modules()}
    outside = [m for m in model.modules() if id(m) not in inside]
    assert outside and not [m for m in outside if isinstance(m, tuple(fast.FAST_CLASSES.values()))]


def _embedding_pair(padding_idx=0):
    torch.manual_seed(3)
    reference = torch.nn.Embedding(50, 8, padding_idx=padding_idx)
    rows = fast_layers.FastEmbedding(50, 8, padding_idx=padding_idx)
    rows.load_state_dict(reference.state_dict())
    return reference, rows


def test_row_gradient_embedding_matches_the_dense_gradient_over_steps():
    """Accumulation within a step, zero_grad(set_to_none) between steps, padding rows: the same .grad."""
    reference, rows = _embedding_pair()
    g = torch.Generator().manual_seed(4)
    buffers = set()
    for step in range(4):
        rows.train()  # a loop may call train() every step: the buffer stays
        for table in (reference, rows):
            table.weight.grad = None
        for _ in range(2):  # two backwards accumulate, as the tasks of one step do
            ids = torch.randint(0, 50, (3, 7), generator=g)
            ids[0, -2:] = 0  # padding
            upstream = torch.randn(3, 7, 8, generator=g)
            for table in (reference, rows):
                (table(ids) * upstream).sum().backward()
        assert rows.weight.grad is not None
        buffers.add(id(rows.weight.grad))
        torch.testing.assert_close(rows.weight.grad, reference.weight.grad, rtol=0, atol=1e-6)
        assert rows.weight.grad[0].abs().max() == 0  # the padding row never learns
        rows.weight.grad.mul_(0.5)  # clipping or gradient surgery writes into it: forgotten next step
        reference.weight.grad.mul_(0.5)
        rows.weight.grad[1:3] = 1.0
    assert rows.weight.grad is rows.__dict__["_grad_buffer"]  # one buffer, reused: no dense gradient allocated per step
    assert len(buffers) == 1


def test_row_gradient_embedding_adds_into_a_gradient_it_did_not_make_and_steps_aside():
    reference, rows = _embedding_pair(padding_idx=None)
    ids = torch.tensor([[1, 2, 2, 49]])
    for table in (reference, rows):
        table.weight.grad = torch.ones_like(table.weight)
        table(ids).sum().backward()
    torch.testing.assert_close(rows.weight.grad, reference.weight.grad)
    rows.eval()  # eval mode, no grad, or rows_backward False: the stock lookup
    assert "_grad_buffer" not in rows.__dict__
    with torch.no_grad():
        torch.testing.assert_close(rows(ids), reference(ids))
    rows.train()
    fast_layers.rows_backward(rows, False)
    rows.weight.grad = None
    rows(ids).sum().backward()
    assert "_grad_buffer" not in rows.__dict__ and rows.weight.grad[2, 0] == 2


def test_fast_model_word_embeddings_gradient_is_reused_between_steps():
    reference, fast_model = models()
    batch = make_batch(*LENGTHS["mixed"])
    for step in range(2):
        for model in (reference, fast_model):
            model.train()
            model.zero_grad(set_to_none=True)
            loss_of(model(**batch), batch["attention_mask"]).backward()
        torch.testing.assert_close(fast_model.embeddings.word_embeddings.weight.grad,
                                   reference.embeddings.word_embeddings.weight.grad, rtol=0, atol=FP32_TOL)
    assert isinstance(fast_model.embeddings.word_embeddings, fast_layers.FastEmbedding)
