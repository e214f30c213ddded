"""The `pytest11` entry point of lenbench's pytest plugin, and whether pytest has loaded it.

Separate from the plugin module so that the root conftest.py can ask without importing the
plugin: a plugin module imported before pytest registers it is not assertion-rewritten (pytest
warns), and registering one module both by entry point and by `pytest_plugins` is an error.
"""

from __future__ import annotations

import os
from importlib.metadata import entry_points

#: The plugin module; pyproject.toml's `[project.entry-points.pytest11]` names it as `lenbench`.
PLUGIN_MODULE = "lenbench.benchmark.pytest_plugin"
GROUP, NAME = "pytest11", "lenbench"


def autoloaded(environ: dict[str, str] | None = None) -> bool:
    """Whether pytest loads the plugin through its installed entry point: the installed
    distribution declares it (pointing at `PLUGIN_MODULE`) and plugin autoloading is on."""
    environ = os.environ if environ is None else environ
    if environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "").strip():
        return False
    return any(ep.name == NAME and ep.value == PLUGIN_MODULE for ep in entry_points(group=GROUP))


def conftest_plugins(environ: dict[str, str] | None = None) -> list[str]:
    """What the root conftest.py's `pytest_plugins` lists: the plugin, unless the entry point loads it."""
    return [] if autoloaded(environ) else [PLUGIN_MODULE]
