"""The reproduction: the five papers' findings tested by ablation sweeps (reproduce.py); see each module."""
