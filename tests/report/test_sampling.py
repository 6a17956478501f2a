"""The stratified sample of cases a large report.html embeds."""

from __future__ import annotations

import numpy as np

from faultline.report.sampling import StratifiedSampler, quotas


def test_more_strata_than_room_keeps_one_case_of_as_many_strata_as_fit() -> None:
    # 5,001 categories of one case each and a page for 5,000 (here: 7 and 5).
    strata = [(f"c{i}", "pass") for i in range(7)]
    sizes = dict.fromkeys(strata, 1)
    assert sorted(quotas(sizes, 5).values()) == [0, 0, 1, 1, 1, 1, 1]
    sampler = StratifiedSampler(sizes, 5, seed=0)
    rows = np.arange(7)
    sampler.offer(rows, sampler.codes(strata), [f"case{i}" for i in range(7)])
    chosen = sampler.chosen()
    assert len(chosen) == 5
    assert [item for _, item in chosen] == [f"case{i}" for i in range(5)]
