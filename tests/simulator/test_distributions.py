"""Length distributions: moments within tolerances, clipping, parsing, errors."""

import numpy as np
import pytest

from simulator.workload.distributions import (
    Constant,
    Empirical,
    LogNormal,
    Normal,
    ParetoLogNormal,
    Uniform,
    distribution_from_dict,
    parse_distribution,
)
from simulator.workload.requests import WorkloadError

N = 200_000


def draw(text, seed=0, n=N):
    return parse_distribution(text).sample(np.random.default_rng(seed), n)


def test_samples_are_int64_arrays_of_requested_length():
    x = draw("normal:512,128", n=17)
    assert x.dtype == np.int64 and x.shape == (17,)


def test_constant_is_constant():
    assert set(draw("const:256", n=1000).tolist()) == {256}


def test_uniform_covers_both_ends_with_the_right_mean():
    x = draw("uniform:10,100")
    assert x.min() == 10 and x.max() == 100
    assert x.mean() == pytest.approx(55, rel=0.01)


def test_normal_mean_and_std():
    x = draw("normal:512,128")
    assert x.mean() == pytest.approx(512, rel=0.01)
    assert x.std() == pytest.approx(128, rel=0.02)


def test_normal_is_clipped_to_min_and_max():
    x = draw("normal:512,512,min=16,max=2048")
    assert x.min() == 16 and x.max() == 2048


def test_lognormal_by_arithmetic_mean_and_std():
    x = draw("lognormal:512,256")
    assert x.mean() == pytest.approx(512, rel=0.02)
    assert x.std() == pytest.approx(256, rel=0.05)


def test_lognormal_by_mu_sigma_has_median_exp_mu():
    x = draw("lognormal-mu:6,0.5")
    assert np.median(x) == pytest.approx(np.exp(6), rel=0.02)


def test_paretolognormal_defaults_are_blis_parameters():
    d = parse_distribution("paretolognormal")
    assert (d.alpha, d.xm, d.mu, d.sigma, d.mix_weight) == (1.5, 100.0, 5.2, 0.7, 0.35)


def test_paretolognormal_mixture_fraction_and_median_below_a_gaussian_of_similar_mean():
    d = ParetoLogNormal(mix_weight=0.35, max=100_000)
    x = d.sample(np.random.default_rng(1), N)
    # Pareto draws are >= xm; the log-normal part is below xm with probability Phi((ln 100 - 5.2)/0.7)
    from math import erf, log, sqrt
    p_logn_below = 0.5 * (1 + erf((log(100) - 5.2) / 0.7 / sqrt(2)))
    assert (x < 100).mean() == pytest.approx(0.65 * p_logn_below, abs=0.01)
    assert np.median(x) < 200  # the seed's claim: lower median than N(256, .)
    assert np.mean(np.minimum(x, 10_000)) == pytest.approx(250, rel=0.1)


def test_empirical_resamples_given_values(tmp_path):
    f = tmp_path / "lengths.txt"
    f.write_text("# observed\n10 20\n30,40\n")
    x = parse_distribution(f"empirical:{f}").sample(np.random.default_rng(0), 40_000)
    assert set(x.tolist()) == {10, 20, 30, 40}
    assert x.mean() == pytest.approx(25, rel=0.02)


def test_empirical_error_names_the_line(tmp_path):
    f = tmp_path / "lengths.txt"
    f.write_text("10\n20\nabc\n")
    with pytest.raises(WorkloadError, match="line 3"):
        parse_distribution(f"empirical:{f}", name="prompt")


def test_empirical_missing_file():
    with pytest.raises(WorkloadError, match="prompt: cannot read empirical file"):
        parse_distribution("empirical:/no/such/file.txt", name="prompt")


def test_same_seed_same_samples_different_seed_different():
    assert np.array_equal(draw("lognormal:512,256", 3, 1000), draw("lognormal:512,256", 3, 1000))
    assert not np.array_equal(draw("lognormal:512,256", 3, 1000), draw("lognormal:512,256", 4, 1000))


@pytest.mark.parametrize("text", [
    "const:256", "uniform:10,100", "normal:512,128,min=16,max=2048", "lognormal:512,256",
    "lognormal-mu:6,0.5", "paretolognormal:1.5,100,5.2,0.7,0.35",
])
def test_string_and_dict_round_trip(text):
    d = parse_distribution(text)
    assert parse_distribution(d.to_string()) == d
    assert distribution_from_dict(d.to_dict()) == d


def test_empirical_dict_round_trip():
    d = Empirical(values=(5, 6, 7))
    assert distribution_from_dict(d.to_dict()) == d


@pytest.mark.parametrize("text, message", [
    ("foo:1", "prompt: unknown distribution 'foo'"),
    ("normal:1", "normal takes 2 argument"),
    ("normal:a,b", "'a' is not a number"),
    ("normal:5,5,min=10,max=5", "prompt.min: 10 is above max 5"),
    ("uniform:5,1", "prompt.low"),
    ("const:0", "prompt.value"),
    ("const:20000000", "prompt.value"),
    ("normal:-5,1", "prompt.mean"),
    ("lognormal:0,1", "prompt.mean"),
    ("paretolognormal:1.5,100,5.2,0.7,2", "prompt.mix_weight"),
    ("normal:1,2,zz=3", "unknown option 'zz'"),
    ("", "prompt: expected a distribution"),
])
def test_bad_specs_raise_workload_error_naming_the_field(text, message):
    with pytest.raises(WorkloadError, match=message.replace("(", r"\(")):
        parse_distribution(text, name="prompt")


def test_dict_with_unknown_field_is_rejected():
    with pytest.raises(WorkloadError, match="output.median: unknown field"):
        distribution_from_dict({"kind": "normal", "mean": 1, "std": 1, "median": 3}, name="output")


def test_dataclasses_are_frozen():
    with pytest.raises(AttributeError):
        Normal(1.0, 1.0).mean = 3  # type: ignore[misc]
    assert Constant(5) == Constant(value=5) and Uniform(1, 2) != Uniform(1, 3)
    assert LogNormal().mu_sigma[1] > 0
