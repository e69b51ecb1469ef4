"""The benchmark scripts as modules, for the tests of their pure parts (``benchmarks/`` is not
a package: each script runs on its own)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name: str) -> ModuleType:
    """``benchmarks/<name>.py``, imported under ``name``."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # registered first, as an import would: a dataclass looks its module up while it is built
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
