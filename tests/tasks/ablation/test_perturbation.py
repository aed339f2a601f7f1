"""The layer ratios' null baseline (`python -m tasks.ablation.perturbation`): every layer moved by the same share of
its own norm, the embeddings left; the pair form's copies perturbed in independent directions; bad flags refused."""
import argparse

import pytest

from tasks.ablation import perturbation
from tasks.ablation.studies.dynamics import compare_encoders
from tasks.reproduction.findings import BY_ID
from tests.helpers import run_cli

SENTENCES = ["a short sentence .", "the film is long , slow and dull"]


def test_the_perturbation_moves_every_layer_by_the_same_share_of_its_norm(pretrained, tokenizer):
    moved = perturbation.perturb(pretrained, 0.03, seed=0)
    before, after = dict(pretrained.named_parameters()), dict(moved.named_parameters())
    for name, p in before.items():
        shift = float((after[name] - p).detach().norm())
        if name.startswith("encoder.layer."):
            assert shift == pytest.approx(0.03 * float(p.detach().norm()), rel=1e-4), name
        else:
            assert shift == 0.0, name            # the embeddings stay
    batch = tokenizer.collate(tokenizer.encode(SENTENCES))
    curves = compare_encoders(pretrained, moved, [batch])
    norms = [float(pretrained.encoder.layer[i].output.dense.weight.detach().norm()) for i in range(6)]
    # the output dense weight's L2 is 0.03 of its norm, so the L2 ratio of an equal relative change is the norm ratio
    assert curves["weight_l2"] == pytest.approx([0.03 * x for x in norms], rel=1e-4)
    ratios = perturbation.ratios(curves, 6)
    assert ratios["singh-later-layers-move"] == pytest.approx((norms[4] + norms[5]) / (norms[0] + norms[1]) - 1,
                                                              rel=1e-3)
    assert set(ratios) == {fid for fid, *_ in perturbation.RATIOS} and all(fid in BY_ID for fid in ratios)


def test_the_pair_mode_compares_two_independently_perturbed_copies(pretrained, tokenizer):
    batch = tokenizer.collate(tokenizer.encode(SENTENCES))
    args = argparse.Namespace(pairs=2, seeds=3, relative=0.03)
    found = perturbation.comparisons(pretrained, args, [batch], 6)
    assert [s["seed"] for s in found] == [[0, 1], [2, 3]]                 # no copy shared: independent pairs
    expected = compare_encoders(perturbation.perturb(pretrained, 0.03, 2), perturbation.perturb(pretrained, 0.03, 3),
                                [batch])
    assert found[1]["curves"]["svcca"] == pytest.approx(expected["svcca"])
    assert found[1]["ratios"] == pytest.approx(perturbation.pair_ratios(expected, 6))
    assert found[1]["ratios"]["svcca"] == pytest.approx(perturbation.ratio(expected["svcca"], "top", "bottom", 1, 6))


@pytest.mark.parametrize("argv", [["--pairs", "-1"], ["--seeds", "0"], ["--relative", "1.5"]])
def test_bad_flags_are_one_line_and_status_2(argv):
    code, out, err = run_cli(perturbation.main, argv)
    assert code == 2 and err.strip().startswith("perturbation: ") and len(err.strip().splitlines()) == 1
