"""probes.py: the best probe layer is chosen on held-out training rows, never on dev."""


from tasks.reproduction import measures
from tests.helpers.reproduction import CTX, LARGE, record


def test_the_probe_layer_is_chosen_on_held_out_training_data_not_dev():
    records = []
    for layer in range(7):
        for s in range(5):
            dev = 0.4 if layer == 5 else 0.3        # dev would pick layer 5
            held = 0.5 if layer == 3 else 0.35      # the held-out training share picks layer 3
            info = {"penalty": {"sst": 1.0}, "holdout_score": {"sst": held}}   # at the penalty chosen on it
            records.append(record(f"layer={layer},pooling=mean", s, LARGE, {"layer": layer}, {"sst": dev},
                                  info=info))
    results = measures.Results()
    results.add("probe", "probe", records)
    assert measures.best_probe(results, CTX, LARGE) == (3, "mean")
