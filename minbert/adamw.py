"""AdamW (Loshchilov & Hutter) from scratch: the optimiser the course asks students to write."""
import math

import torch


class AdamW(torch.optim.Optimizer):
    """Adam with decoupled weight decay: the decay shrinks the weights directly, so Adam's per-parameter
    scaling cannot weaken it as it would an L2 term added to the gradient.

    Signature and update are the course's, so its optimizer check passes: eps is added to sqrt(v) before
    the bias correction is folded into the step size, and the decay follows the update. correct_bias=False
    (no bias correction) is the original BERT's behaviour, which the course's API keeps.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, correct_bias=True):
        if lr < 0:
            raise ValueError(f"learning rate must be >= 0, got {lr}")
        if not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"betas must be in [0, 1), got {betas}")
        if eps < 0:
            raise ValueError(f"eps must be >= 0, got {eps}")
        if weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      correct_bias=correct_bias))

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:  # optimizer states saved before correct_bias existed
            group.setdefault("correct_bias", True)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr = group["lr"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("AdamW does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                t = state["step"]
                m, v = state["exp_avg"], state["exp_avg_sq"]
                # mul/add rather than lerp: the course's rounding, 3x closer to its reference values
                m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                step_size = lr
                if group["correct_bias"]:
                    step_size = lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
                p.addcdiv_(m, v.sqrt().add_(group["eps"]), value=-step_size)
                if group["weight_decay"] > 0:
                    # p - (lr * wd) * p rather than p * (1 - lr * wd): in float32, 1 - 1e-7 rounds
                    # to 1 - 1.19e-7, a decay 19% stronger than asked for.
                    p.add_(p, alpha=-lr * group["weight_decay"])
        return loss
