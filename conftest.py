"""Wiring only: the options, fixtures and hooks of `pytest bench` and `pytest tests` are the
pytest plugin `lenbench.benchmark.pytest_plugin` (its docstring lists the options).

An installed lenbench registers that plugin through its `pytest11` entry point before this file
is read; where the installed lenbench does not declare it (an older editable install,
`PYTHONPATH=.` without an install, `PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`) it is loaded from here.
Registering it both ways is an error, so this lists it only when the entry point did not.
"""

from lenbench.benchmark.entry_point import conftest_plugins

pytest_plugins = conftest_plugins()
