"""``upsertsink.lint`` in a source checkout: the linter's package is the top-level ``lint/`` folder.

The wheel and the (strict) editable install put ``lint/`` at ``upsertsink/lint`` (pyproject.toml's
``package-dir``), and this file is in neither. It serves only an interpreter that imports ``upsertsink`` from
the repository itself (``python -m pytest`` at the root puts the root first on ``sys.path``): it loads
``lint/__init__.py`` as ``upsertsink.lint``, with ``lint/`` as the package's folder, and puts that module in
its own place, so every module of the linter is the one in ``lint/`` (they import each other relatively).
"""

import importlib.util
import os
import sys

_folder = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "lint")
_spec = importlib.util.spec_from_file_location(
    __name__, os.path.join(_folder, "__init__.py"), submodule_search_locations=[_folder]
)
_package = importlib.util.module_from_spec(_spec)
sys.modules[__name__] = _package  # the import system hands out what is in sys.modules once this file has run
_spec.loader.exec_module(_package)
