"""bench.sizes builds a bert-base-shaped checkpoint the trainer loads; bench.threads splits threads' time."""
import json
import sys

import transformers

import minbert
from bench import sizes, threads


def test_the_bert_base_shaped_folder_loads_with_the_embedded_vocabulary_and_is_built_once(tmp_path):
    assert (transformers.BertConfig().num_hidden_layers, transformers.BertConfig().hidden_size) == (12, 768)
    folder = sizes.bert_base_shaped(tmp_path, num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                    intermediate_size=128)
    model = minbert.from_pretrained(str(folder))
    assert (model.num_layers, model.config.hidden_size) == (2, 64)
    embedded, _ = minbert.resolve("minilm")
    assert (folder / "vocab.txt").read_bytes() == (embedded / "vocab.txt").read_bytes()
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert sizes.bert_base_shaped(tmp_path, num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                  intermediate_size=128) == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp  # not built again
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]  # no half-built folder left


def test_row_gives_the_minutes_of_a_default_epoch_from_the_mean_training_rate():
    def task(rate):
        return {"train": {"examples_per_s": {"minbert": rate}, "ratio_median_of_rounds": 2.0,
                          "utilisation": {"minbert": 0.3}},
                "eval": {"ratio_median_of_rounds": 1.1}, "ceiling": {"utilisation": 0.6}}
    figures = {"tasks": {"sst": task(40.0), "quora": task(60.0)},
               "memory_mib": {"minbert": {"VmHWM": 900.0, "ru_maxrss": 900.0},
                              "transformers": {"VmHWM": 1800.0, "ru_maxrss": 1800.0}}}
    row = sizes.row("m", figures)
    assert row["minutes_per_default_epoch"] == sizes.DEFAULT_EPOCH_STEPS * 32 / 50.0 / 60
    assert row["share_of_ceiling"] == [0.5, 0.5] and row["peak_rss_ratio"] == 0.5


def test_threads_splits_wall_time_into_running_waiting_and_sleeping(tmp_path, capsys):
    busy_then_idle = "import time\nt = time.time()\nwhile time.time() - t < 1.0: pass\ntime.sleep(1.0)"
    code = threads.main(["--interval", "0.2", "--json", str(tmp_path / "t.json"), "--", sys.executable, "-c",
                         busy_then_idle])
    assert code == 0
    figures = json.loads((tmp_path / "t.json").read_text())
    main = next(t for t in figures["threads"] if t["main"])
    assert 0.3 < main["run_s"] + main["wait_s"] < 1.6 and figures["wall_s"] >= 2.0  # busy 1 s of 2
    assert "cores busy on average" in capsys.readouterr().out
