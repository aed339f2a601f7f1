"""Imported first by every entry point, before anything loads torch.

OpenMP reads OMP_WAIT_POLICY once, when torch loads it. With its default, threads spin-wait for
a core that another job on the machine holds, and a step runs 3-25x slower (docs/speed.md);
passive threads yield the core. A value the user set is kept.
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
