"""Figures, step 4 of the report path: one module per figure family, each function drawing frames
it is given (the tidy rows of `lenbench.report.rows.load_results`, the leaderboard of
`lenbench.report.tables`, the cost tables of `lenbench.report.cost`, the position matrices of
`lenbench.report.geometry`) into a PNG or SVG file; none reads a results source.

- `_style`: saving (Agg, atomic, reproducible SVGs), the palette and line style of every series, panel grids.
- `extrapolation`: the primary metric against evaluation length.
- `heatmap`: the leaderboard as heatmaps (encoding × length ratio).
- `position`: lm loss by position in the window (bucketed rows).
- `needle`: passkey accuracy by needle depth × length (bucketed rows); `_buckets` selects those rows.
- `cost`: kernel time against length; retention against training-step cost.
- `geometry`: one encoding's position pattern.
"""

import matplotlib

# Before any module of the package imports pyplot: figures render without a display.
matplotlib.use("Agg")
