"""Layer-level comparison of a pretrained and a fine-tuned BERT.

Supports the fine-tuning dynamics study (Hao et al., "Investigating Learning
Dynamics of BERT Fine-Tuning"): how far each layer's weights moved, how much
each layer's attention changed, and how similar each layer's representations
stay. Deliberately depends only on torch/numpy so it can be used on any pair
of Hugging Face style state dicts and model outputs.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "weight_distances",
    "layer_weight_distances",
    "attention_js_divergence",
    "svcca_distance",
    "layerwise_attention_js",
    "layerwise_svcca",
]

# Matches "encoder.layer.<i>." anywhere, so prefixed keys such as
# "bert.encoder.layer.3.output.dense.weight" are attributed correctly too.
_LAYER_KEY = re.compile(r"(?:^|\.)encoder\.layer\.(\d+)\.")


# --------------------------------------------------------------------------
# Weight distances
# --------------------------------------------------------------------------

def weight_distances(state_a: dict[str, Tensor], state_b: dict[str, Tensor]) -> dict[str, float]:
    """Frobenius distance per parameter shared by both state dicts.

    Keys missing from either side, shape mismatches (e.g. a new task head) and
    non-float buffers (e.g. ``position_ids``) are skipped rather than raising,
    because a fine-tuned checkpoint legitimately differs from its pretrained
    parent in exactly those ways. Computed in float64 so tiny fine-tuning
    updates are not lost to rounding.
    """
    out: dict[str, float] = {}
    for name, a in state_a.items():
        b = state_b.get(name)
        if b is None or not isinstance(a, Tensor) or not isinstance(b, Tensor):
            continue
        if not (torch.is_floating_point(a) and torch.is_floating_point(b)):
            continue
        if a.shape != b.shape:
            continue
        diff = a.detach().to("cpu", torch.float64) - b.detach().to("cpu", torch.float64)
        out[name] = float(torch.linalg.vector_norm(diff))
    return out


def layer_weight_distances(state_a: dict[str, Tensor], state_b: dict[str, Tensor],
                           num_layers: int) -> list[float]:
    """Distance per encoder layer, treating all its parameters as one vector.

    Summing squared per-tensor distances gives the Frobenius distance of the
    concatenated parameters, so layers are comparable regardless of how their
    weights are split into tensors. Layers with no shared tensors get 0.
    """
    sq = [0.0] * num_layers
    for name, dist in weight_distances(state_a, state_b).items():
        m = _LAYER_KEY.search(name)
        if m is None:
            continue
        idx = int(m.group(1))
        if 0 <= idx < num_layers:
            sq[idx] += dist * dist
    return [math.sqrt(s) for s in sq]


# --------------------------------------------------------------------------
# Attention Jensen-Shannon divergence
# --------------------------------------------------------------------------

def _as_mask(attention_mask, batch: int, seq: int) -> Tensor:
    if attention_mask is None:
        return torch.ones(batch, seq, dtype=torch.bool)
    mask = torch.as_tensor(attention_mask).detach().cpu()
    if mask.shape != (batch, seq):
        raise ValueError(f"attention_mask shape {tuple(mask.shape)} != {(batch, seq)}")
    return mask != 0


def attention_js_divergence(attn_a: Tensor, attn_b: Tensor, attention_mask: Tensor) -> float:
    """Mean Jensen-Shannon divergence (nats) between two layers' attention maps.

    Padding keys are dropped and each row renormalised so that padding (which
    a model may still assign a sliver of mass) cannot change the result;
    padding queries are excluded from the average. Every real query of every
    head counts equally. ``xlogy`` gives 0 log 0 = 0, so one-hot or disjoint
    distributions are handled exactly.
    """
    if attn_a.shape != attn_b.shape:
        raise ValueError(f"attention shapes differ: {tuple(attn_a.shape)} vs {tuple(attn_b.shape)}")
    if attn_a.dim() != 4:
        raise ValueError("attention must be (batch, heads, query, key)")
    batch, _, n_q, n_k = attn_a.shape
    if n_q != n_k:
        raise ValueError("self-attention expected: query and key lengths must match")
    mask = _as_mask(attention_mask, batch, n_k)

    p = attn_a.detach().to("cpu", torch.float64)
    q = attn_b.detach().to("cpu", torch.float64)
    key_mask = mask[:, None, None, :].to(torch.float64)
    p = p * key_mask
    q = q * key_mask
    # Guard against rows whose whole mass sat on padding; such rows only occur
    # for padding queries, which are excluded below anyway.
    p = p / p.sum(-1, keepdim=True).clamp_min(1e-300)
    q = q / q.sum(-1, keepdim=True).clamp_min(1e-300)

    m = 0.5 * (p + q)
    kl_pm = (torch.xlogy(p, p) - torch.xlogy(p, m)).sum(-1)
    kl_qm = (torch.xlogy(q, q) - torch.xlogy(q, m)).sum(-1)
    js = 0.5 * (kl_pm + kl_qm)  # (batch, heads, query)

    query_mask = mask[:, None, :].expand_as(js)
    if not bool(query_mask.any()):
        raise ValueError("attention_mask has no real tokens")
    val = float(js[query_mask].mean())
    return min(max(val, 0.0), math.log(2.0))


def layerwise_attention_js(attns_a: Sequence[Tensor], attns_b: Sequence[Tensor],
                           attention_mask) -> list[float]:
    """Attention JS divergence for each layer, in layer order."""
    if len(attns_a) != len(attns_b):
        raise ValueError(f"layer counts differ: {len(attns_a)} vs {len(attns_b)}")
    return [attention_js_divergence(a, b, attention_mask) for a, b in zip(attns_a, attns_b)]


# --------------------------------------------------------------------------
# SVCCA
# --------------------------------------------------------------------------

def _to_f64(x) -> np.ndarray:
    if isinstance(x, Tensor):
        x = x.detach().to("cpu", torch.float64).numpy()
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"expected (n_points, dim), got shape {arr.shape}")
    return arr


def _top_directions(x: np.ndarray, keep_variance: float) -> np.ndarray:
    """Orthonormal basis (n_points, k) of the leading centred singular directions.

    Numerically-zero singular values are discarded first: after centring the
    rank is at most n_points - 1, and keeping null directions would add pure
    rounding noise to the CCA.
    """
    xc = x - x.mean(axis=0, keepdims=True)
    u, s, _ = np.linalg.svd(xc, full_matrices=False)
    if s.size == 0 or s[0] == 0.0:
        raise ValueError("representation has zero variance")
    tol = s[0] * max(xc.shape) * np.finfo(np.float64).eps
    rank = int(np.sum(s > tol))
    var = s[:rank] ** 2
    frac = np.cumsum(var) / var.sum()
    # Small slack so keep_variance=1.0 is reachable despite rounding in cumsum.
    k = int(np.searchsorted(frac, keep_variance - 1e-12)) + 1
    k = min(max(k, 1), rank)
    return u[:, :k]


def svcca_distance(x, y, keep_variance: float = 0.99) -> float:
    """SVCCA distance (Raghu et al., 2017): 1 - mean canonical correlation.

    The SVD step already yields orthonormal bases of the reduced views, so
    the canonical correlations are the singular values of ``Ux^T Uy``; this
    never inverts a covariance matrix and stays stable when n_points < dim.
    Note that CCA is trivially perfect once kx + ky approaches n_points, so
    use many more points than kept directions for meaningful values.
    """
    if not 0.0 < keep_variance <= 1.0:
        raise ValueError("keep_variance must be in (0, 1]")
    xa, ya = _to_f64(x), _to_f64(y)
    if xa.shape[0] != ya.shape[0]:
        raise ValueError(f"point counts differ: {xa.shape[0]} vs {ya.shape[0]}")
    if xa.shape[0] < 2:
        raise ValueError("need at least 2 points")
    ux = _top_directions(xa, keep_variance)
    uy = _top_directions(ya, keep_variance)
    rho = np.linalg.svd(ux.T @ uy, compute_uv=False)
    rho = np.clip(rho, 0.0, 1.0)
    return float(min(max(1.0 - rho.mean(), 0.0), 1.0))


def layerwise_svcca(hidden_a: Sequence[Tensor], hidden_b: Sequence[Tensor], attention_mask,
                    keep_variance: float = 0.99, max_points: int = 4000,
                    seed: int = 0) -> list[float]:
    """SVCCA distance per layer over real (non-padding) token representations.

    The same seeded subsample of tokens is used for both models and every
    layer, because SVCCA needs point-wise correspondence and layers should be
    compared on identical inputs.
    """
    if len(hidden_a) != len(hidden_b):
        raise ValueError(f"layer counts differ: {len(hidden_a)} vs {len(hidden_b)}")
    if not hidden_a:
        return []
    batch, seq = hidden_a[0].shape[:2]
    mask = _as_mask(attention_mask, batch, seq).reshape(-1).numpy()
    idx = np.flatnonzero(mask)
    if idx.size > max_points:
        rng = np.random.default_rng(seed)
        idx = np.sort(rng.choice(idx, size=max_points, replace=False))
    idx_t = torch.from_numpy(idx)

    out = []
    for ha, hb in zip(hidden_a, hidden_b):
        if ha.shape[:2] != (batch, seq) or hb.shape[:2] != (batch, seq):
            raise ValueError("hidden states must be (batch, seq, hidden) matching the mask")
        xa = ha.detach().reshape(batch * seq, -1).index_select(0, idx_t.to(ha.device))
        xb = hb.detach().reshape(batch * seq, -1).index_select(0, idx_t.to(hb.device))
        out.append(svcca_distance(xa, xb, keep_variance))
    return out
