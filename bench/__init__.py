"""Benchmarks: `python -m bench.throughput` compares minBERT with Hugging Face transformers."""
