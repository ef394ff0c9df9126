"""The roofline tools of Chapter 10: the bound, the ridge, a product's intensity, MBU, and their refusals."""
import pytest

from inferlab.analysis.roofline import attainable, mbu, pass_bound_s, product_intensity, ridge_point
from inferlab.errors import BadRequest


def test_the_roof_is_the_lower_of_the_two_limits_and_they_meet_at_the_ridge():
    F, B = 100e9, 20e9
    assert ridge_point(F, B) == 5
    assert attainable(0.5, F, B) == 0.5 * B  # memory-bound
    assert attainable(64, F, B) == F  # compute-bound
    assert attainable(ridge_point(F, B), F, B) == pytest.approx(F)


def test_a_pass_takes_the_slower_of_its_arithmetic_and_its_bytes():
    # the worked example of Chapter 10: 0.27 GFLOP over 538 MB on 100 GFLOP/s and 20 GB/s
    assert pass_bound_s(0.27e9, 538e6, 100e9, 20e9) == pytest.approx(538e6 / 20e9)
    assert pass_bound_s(34.4e9, 538e6, 100e9, 20e9) == pytest.approx(34.4e9 / 100e9)


def test_a_product_with_few_rows_does_two_flops_per_weight_read():
    # one row by a float32 576 x 1536 matrix: just under 2 FLOPs per 4-byte weight
    assert product_intensity(1, 576, 1536, 4) == pytest.approx(0.5, rel=0.01)
    # b rows share one read: about b/2 in float32, b in two-byte weights, until the activations' bytes count
    assert product_intensity(8, 4096, 4096, 2) == pytest.approx(8, rel=0.01)
    assert product_intensity(4096, 4096, 4096, 2) == pytest.approx(4096 / 3, rel=0.01)


def test_mbu_is_tokens_per_second_over_the_roofline_rate():
    assert mbu(20, 538e6, 21.52e9) == pytest.approx(20 / (21.52e9 / 538e6))
    assert mbu(0, 538e6, 1e9) == 0


@pytest.mark.parametrize("call", [lambda: attainable(1, 0, 1), lambda: attainable(-1, 1, 1),
                                  lambda: pass_bound_s(1, 1, 1, 0), lambda: pass_bound_s(-1, 1, 1, 1),
                                  lambda: ridge_point(1, -1), lambda: product_intensity(0, 4, 4, 4),
                                  lambda: mbu(1, 1, 0), lambda: mbu(-1, 1, 1)])
def test_bad_inputs_are_refused_with_a_clear_error(call):
    with pytest.raises(BadRequest):
        call()
