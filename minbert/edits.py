"""Model edits for the layer-level studies: freeze, reinitialise, permute, truncate.

Each function changes the model in place and returns it, and leaves every
tensor it does not name bit-identical.
"""
import torch
from torch import nn

from .errors import UserError
from .model import BertModel


def _check_layer(model: BertModel, layer: int):
    if not 0 <= layer < model.num_layers:
        raise UserError(f"layer {layer} is out of range: the model has layers 0..{model.num_layers - 1}")


def resolve_freeze_until(model: BertModel, k: int) -> int:
    """`k` counts layers from the bottom; a negative `k` counts from the top (-3 = all but the last three)."""
    n = model.num_layers
    if k < 0:
        if -k > n:
            raise UserError(f"--freeze-until {k}: the model has only {n} layers")
        k = n + k
    return k


def freeze_until(model: BertModel, k: int) -> int:
    """Freeze the embeddings and layers 0..k-1; return how many layers are frozen.

    With k = 0 nothing is frozen; k beyond the layer count freezes the whole encoder
    (the pooler stays trainable).
    """
    k = resolve_freeze_until(model, k)
    if k == 0:
        return 0
    for p in model.embeddings.parameters():
        p.requires_grad_(False)
    for block in model.encoder.layer[:k]:
        for p in block.parameters():
            p.requires_grad_(False)
    return min(k, model.num_layers)


def freeze_encoder(model: BertModel) -> int:
    """Freeze every parameter, pooler included (the course's `pretrain` mode); return the layer count."""
    for p in model.parameters():
        p.requires_grad_(False)
    return model.num_layers


# What a reinitialisation re-draws. "all": every linear layer's weight and bias and every
# LayerNorm (BERT's initialisation of the whole block). "linear-weights": only the weight
# matrices (Singh & Giovanardi: a layer's six, Q, K, V, attention output, intermediate and
# output), so biases and LayerNorms keep their pretrained values.
REINIT_POLICIES = ("all", "linear-weights")


def _check_policy(policy: str):
    if policy not in REINIT_POLICIES:
        raise UserError(f"reinitialisation policy {policy!r}: choose from {', '.join(REINIT_POLICIES)}")


def trunc_normal_like(t: torch.Tensor, std: float, generator=None) -> torch.Tensor:
    out = torch.empty(t.shape, dtype=torch.float32)
    nn.init.trunc_normal_(out, mean=0.0, std=std, a=-2 * std, b=2 * std, generator=generator)
    return out.to(t.dtype)


def reinit_layers(model: BertModel, layers, generator=None, policy: str = "all") -> BertModel:
    """Re-draw these layers' linear weights with BERT's init; with policy "all" also zero their biases and
    reset their LayerNorms to 1/0. The same generator draws the same weights under either policy."""
    _check_policy(policy)
    std = model.config.initializer_range
    for i in layers:
        _check_layer(model, i)
        with torch.no_grad():
            for module in model.encoder.layer[i].modules():
                if isinstance(module, nn.Linear):
                    module.weight.copy_(trunc_normal_like(module.weight, std, generator))
                    if policy == "all":
                        module.bias.zero_()
                elif isinstance(module, nn.LayerNorm) and policy == "all":
                    module.weight.fill_(1.0)
                    module.bias.zero_()
    return model


def reinit_layers_from(model: BertModel, k: int, generator=None, policy: str = "all") -> BertModel:
    """Reinitialise every layer >= k (k = num_layers: none; k = 0: all)."""
    return reinit_layers(model, range(k, model.num_layers), generator, policy)


def reinit_embeddings(model: BertModel, generator=None, policy: str = "all") -> BertModel:
    """Re-draw the word, position and segment tables; with policy "all" also reset their LayerNorm."""
    _check_policy(policy)
    std = model.config.initializer_range
    emb = model.embeddings
    with torch.no_grad():
        for table in (emb.word_embeddings, emb.position_embeddings, emb.token_type_embeddings):
            table.weight.copy_(trunc_normal_like(table.weight, std, generator))
        if policy == "all":
            emb.LayerNorm.weight.fill_(1.0)
            emb.LayerNorm.bias.zero_()
    return model


def reinit_heads(model: BertModel, heads, generator=None, policy: str = "all") -> BertModel:
    """Re-draw only the given (layer, head) slices: Q, K, V output rows and the output projection's input
    columns; with policy "all" the head's Q, K, V bias entries are zeroed too."""
    _check_policy(policy)
    std = model.config.initializer_range
    d = model.config.head_size
    for layer, head in heads:
        _check_layer(model, layer)
        if not 0 <= head < model.config.num_attention_heads:
            raise UserError(f"head {head} is out of range: layers have heads "
                            f"0..{model.config.num_attention_heads - 1}")
        attention = model.encoder.layer[layer].attention
        rows = slice(head * d, (head + 1) * d)
        with torch.no_grad():
            for proj in (attention.self.query, attention.self.key, attention.self.value):
                proj.weight[rows] = trunc_normal_like(proj.weight[rows], std, generator)
                if policy == "all":
                    proj.bias[rows] = 0.0
            out = attention.output.dense.weight
            out[:, rows] = trunc_normal_like(out[:, rows], std, generator)
    return model


def permute_layers(model: BertModel, order) -> BertModel:
    """Put the layers in a new order: position i gets the old layer order[i]."""
    order = list(order)
    if sorted(order) != list(range(model.num_layers)):
        raise UserError(f"--order {','.join(map(str, order))} is not a permutation of "
                        f"0..{model.num_layers - 1}")
    model.encoder.layer = nn.ModuleList(model.encoder.layer[i] for i in order)
    return model


def truncate_layers(model: BertModel, k: int) -> BertModel:
    """Keep layers 0..k-1 and drop the rest (k = 0 keeps only the embeddings)."""
    if not 0 <= k <= model.num_layers:
        raise UserError(f"cannot keep {k} layers of a {model.num_layers}-layer model")
    model.encoder.layer = nn.ModuleList(list(model.encoder.layer)[:k])
    return model


def set_dropout(model: nn.Module, p: float) -> nn.Module:
    """Every dropout of `model` (hidden, attention, heads) to probability `p`.

    p = 0 makes training deterministic given the batches: what a comparison of two
    runs that split batches differently (one process vs several) needs.
    """
    if not 0.0 <= p < 1.0:
        raise UserError(f"dropout must be in [0, 1), got {p}")
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = p
    return model
