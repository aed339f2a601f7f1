"""Part 1's per-mode defaults (`classifier.py`), read by its command line.

Chosen so that both modes finish within their CPU budgets with the embedded model
(docs/measurements/2026-11-23-part1.md): 2 epochs each (the course's 10 are sized for a GPU and
bert-base). The head alone trains at the course's constant rate; full fine-tuning takes BERT's warm-up
and linear decay, which measured the same as a constant rate on SST (the same log).
"""
MODE_DEFAULTS = {"pretrain": {"epochs": 2, "lr": 1e-3, "lr_schedule": "constant"},
                 "finetune": {"epochs": 2, "lr": 5e-5, "lr_schedule": "linear"}}


def mode_defaults_text(key: str) -> str:
    """e.g. '0.001 for pretrain, 5e-05 for finetune', for --help."""
    return ", ".join(f"{d[key]} for {mode}" for mode, d in MODE_DEFAULTS.items())
