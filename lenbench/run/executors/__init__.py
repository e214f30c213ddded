"""Where cells run: in this process, a local process pool, or Ray."""
