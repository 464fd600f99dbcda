import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from stablearena.trust import account_weights


def test_weights_are_capped_clipped_at_zero_and_ramped_by_votes():
    a = np.array([-2.0, 0.5, 1.0, 8.0])
    n = np.array([500, 10, 100, 500])
    np.testing.assert_allclose(account_weights(a, n, cap=2.0), [0.0, 0.5, 1.0, 2.0])
    np.testing.assert_allclose(
        account_weights(a, n, cap=2.0, ramp_votes=100), [0.0, 0.05, 1.0, 2.0]
    )


@given(
    st.lists(st.floats(-10, 10), min_size=1, max_size=20),
    st.floats(0.1, 5),
    st.floats(0, 300),
)
def test_no_account_weighs_more_than_the_cap(abilities, cap, ramp):
    a = np.array(abilities)
    n = np.arange(len(a)) * 7.0
    w = account_weights(a, n, cap=cap, ramp_votes=ramp)
    assert np.all(w >= 0) and np.all(w <= cap)
