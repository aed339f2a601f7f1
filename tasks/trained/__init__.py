"""A trained model's folder: the run rebuilt to predict (`predict.py`), RUN_DIR/model/ in Hugging Face
format with its task heads and model card, and the user's own sentences to score."""
