"""The order a pool of workers takes cells in: longest first by the cost model."""

from __future__ import annotations

import dataclasses

from lenbench.config import load_suite
from lenbench.run.estimate import cell_seconds_model, longest_first


def test_longest_first_orders_by_the_cost_model_and_keeps_ties_in_suite_order():
    cells = load_suite("quick").cells()
    ordered = longest_first(cells)
    assert sorted(c.cell_id for c in ordered) == sorted(c.cell_id for c in cells)  # a permutation
    seconds = [cell_seconds_model(c) for c in ordered]
    assert seconds == sorted(seconds, reverse=True)
    # the task that trains longest (sort, 2000 steps, in quick) leads, whichever suite order it has
    assert ordered[0].train.steps == max(c.train.steps for c in cells)
    for a, b in zip(ordered, ordered[1:], strict=False):
        if cell_seconds_model(a) == cell_seconds_model(b):
            assert cells.index(a) < cells.index(b)


def test_a_cell_the_model_cannot_price_keeps_its_place_among_the_cheapest():
    cells = load_suite("smoke").cells()
    broken = dataclasses.replace(cells[0], task=dataclasses.replace(cells[0].task, name="no-such-task"))
    ordered = longest_first([broken, *cells[1:]])
    assert ordered[-1] is broken  # priced 0, not an error: ordering never fails a run
    assert [c.cell_id for c in ordered[:-1]] == [c.cell_id for c in longest_first(cells[1:])]
