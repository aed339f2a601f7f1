"""bench/common.py builds a bert-base-shaped checkpoint the trainer loads."""
import transformers

import minbert
from bench.common import bert_base_shaped


def test_the_bert_base_shaped_folder_loads_with_the_embedded_vocabulary_and_is_built_once(tmp_path):
    assert (transformers.BertConfig().num_hidden_layers, transformers.BertConfig().hidden_size) == (12, 768)
    folder = bert_base_shaped(tmp_path, num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                    intermediate_size=128)
    model = minbert.from_pretrained(str(folder))
    assert (model.num_layers, model.config.hidden_size) == (2, 64)
    embedded, _ = minbert.resolve("minilm")
    assert (folder / "vocab.txt").read_bytes() == (embedded / "vocab.txt").read_bytes()
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert bert_base_shaped(tmp_path, num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                  intermediate_size=128) == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp  # not built again
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]  # no half-built folder left
