"""The course's `optimizer.py`: `from optimizer import AdamW`, as the course's `optimizer_test.py` imports it.

    cp ../shared/data/cs224n-checks/optimizer_test.{py,npy} . && python optimizer_test.py

`AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, correct_bias=True)`, the
course's signature and update, is minbert's own (minbert/adamw.py): this module only gives it the
course's module name.
"""
from minbert.adamw import AdamW

__all__ = ["AdamW"]
