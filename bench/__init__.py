"""The benchmarks: `python -m bench --help` lists them; bench/README.md says how they measure."""
