"""Our WordPiece tokenizer against transformers' BertTokenizerFast on the course's dev files."""
import csv

import pytest

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def reference(pretrained):
    return transformers.BertTokenizerFast.from_pretrained(pretrained.source.folder)


def _read(path):
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def _same(ours, ref):
    assert ours["input_ids"].tolist() == ref["input_ids"].tolist()
    assert ours["token_type_ids"].tolist() == ref["token_type_ids"].tolist()
    assert ours["attention_mask"].tolist() == ref["attention_mask"].tolist()


def test_every_sst_dev_sentence(tokenizer, reference, data_dir):
    sentences = [r["sentence"] for r in _read(data_dir / "ids-sst-dev.csv")]
    assert len(sentences) > 1000
    for start in range(0, len(sentences), 64):
        chunk = sentences[start:start + 64]
        _same(tokenizer(chunk), reference(chunk, padding=True, truncation=True, max_length=512,
                                          return_tensors="pt"))


def test_every_sts_dev_pair(tokenizer, reference, data_dir):
    rows = _read(data_dir / "sts-dev.csv")
    a, b = [r["sentence1"] for r in rows], [r["sentence2"] for r in rows]
    for start in range(0, len(rows), 64):
        _same(tokenizer(a[start:start + 64], b[start:start + 64]),
              reference(a[start:start + 64], b[start:start + 64], padding=True, truncation=True,
                        max_length=512, return_tensors="pt"))


@pytest.mark.parametrize("n_a,n_b", [(300, 300), (40, 25), (5, 40), (40, 5), (7, 8), (3, 4)])
def test_pair_truncation_matches_reference(pretrained, reference, n_a, n_b):
    import minbert
    short = minbert.Tokenizer.from_folder(pretrained.source.folder, max_length=16)
    a, b = "alpha " * n_a, "beta gamma " * (n_b // 2) + "delta " * (n_b % 2)
    _same(short([a, "tiny"], [b, "also tiny"]),
          reference([a, "tiny"], [b, "also tiny"], padding=True, truncation=True, max_length=16,
                    return_tensors="pt"))


def test_overlong_input_is_truncated_not_crashed(pretrained):
    """A 100,000-character sentence: linear time and memory, cut to max_length."""
    import minbert
    tok = minbert.Tokenizer.from_folder(pretrained.source.folder)
    huge = "word " * 20_000
    out = tok([huge, "tiny"], [huge, "also tiny"])
    assert out["input_ids"].shape[1] == tok.max_length == 512
    assert tok([huge])["input_ids"].shape[1] == 512
