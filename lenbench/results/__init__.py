"""The results contract: what a measurement row and a cell result are, in one place.

- `lenbench.results.schema`: the schema version, the columns of a tidy row (name, type, required
  or defaulted), the identity of a measurement, `ResultsError` and the JSON reader that raises it.
- `lenbench.results.labels`: the labels a row carries: the base variant, the baseline prefix,
  the bucket labels and an error's one line.
- `lenbench.results.values`: the coercion of one stored value to its column's type.
- `lenbench.results.cell`: `CellResult`, a cell file as a typed object (built by the compute
  path, written and read by `lenbench.run.store`).
- `lenbench.results.check`: the shape checks of a row and of a cell file as the engine writes them.
- `lenbench.results.frame`: rows of any source (cell files, a tidy CSV, a benchmark JSON) as the
  typed frame every reader uses; rows of older schema versions are upgraded here.

The compute path writes rows with `SCHEMA_VERSION`; the report, `compare` and `publish` read them
through these modules. Nothing here imports torch, the model or the encodings.
"""
