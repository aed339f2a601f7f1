"""A run as saved on disk: its folder rebuilt to predict (`predict.py`), its checkpoint files read safely,
its RUN_DIR/model/ export in Hugging Face format with the task heads and model card, and the user's own
sentences to score."""
