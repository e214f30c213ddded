"""Figures, step 4 of the report path: one module per figure family, each function drawing frames
it is given (the tidy rows of `lenbench.report.rows.load_results`, the leaderboard of
`lenbench.report.tables`, the cost tables of `lenbench.report.cost`, the position matrices of
`lenbench.report.geometry`) into a PNG, SVG or PDF file; none reads a results source.

Every module has a ``CAPTION`` (`cost`: ``COST_CAPTION`` and ``QUALITY_COST_CAPTION``), the caption the
page shows under the figure, and where it can leave panels out a ``*_left_out`` function naming them (every
series at zero or not learned) for the caption to say so.

- `_style`: saving (Agg, atomic, reproducible SVGs), the palette and line style of every series,
  constrained-layout panel grids and outside legends, the panels left out.
- `extrapolation`: the primary metric against evaluation length.
- `heatmap`: the leaderboard as heatmaps (encoding × length ratio).
- `position`: lm loss by position in the window (bucketed rows).
- `needle`: passkey accuracy by needle depth × length (bucketed rows); `_buckets` selects those rows.
- `cost`: kernel time against length; retention against training-step cost.
- `geometry`: one encoding's position pattern, and which patterns are not worth drawing (`pattern_left_out`).
"""

import matplotlib

# Before any module of the package imports pyplot: figures render without a display.
matplotlib.use("Agg")
