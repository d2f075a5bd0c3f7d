"""A package that is also a public function of the API: `gpucluster.check(...)` and
`gpucluster.validate(...)` share their names with the packages `gpucluster.check` and
`gpucluster.validate`. Once such a package is imported (by the CLI, or by any module of it),
Python sets `gpucluster.check` to the package, hiding the lazily loaded function; so the
package itself forwards a call to the function, and both spellings keep working."""

from __future__ import annotations

import sys
import types
from importlib import import_module
from typing import Any


def make_callable(package: str, target: str) -> None:
    """Calling the module `package` calls `target` ("module:function")."""
    module_name, _, attr = target.partition(":")

    class CallablePackage(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return getattr(import_module(module_name), attr)(*args, **kwargs)

    sys.modules[package].__class__ = CallablePackage
