"""Running cells: the compute path of one cell, the driver that alone writes the results directory, its store, fingerprints and executors."""
