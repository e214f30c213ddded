"""`lenbench compare`: quality and speed regressions of one run against another."""
