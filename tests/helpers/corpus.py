"""A tiny BERT shape and a repetitive corpus for pretraining tests."""


TINY = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            max_position_embeddings=64)


SENTENCES = ["the cat sat on the mat .", "a dog ran to the big house .", "the small red bird sang all morning .",
             "unbelievably , the weatherman predicted sunshine again .", "she reorganised the bookshelves twice ."]


def corpus_text(documents=60, lines=6) -> str:
    """Repetitive text: documents of the same few sentences in turn, a blank line between documents."""
    return "\n\n".join("\n".join(SENTENCES[(d + i) % len(SENTENCES)] for i in range(lines))
                       for d in range(documents)) + "\n"
