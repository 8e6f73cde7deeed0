"""Lists FFCV's public Python API, module by module, as JSON.

Run it with the interpreter of an environment where the real FFCV is installed (the
reference environment of docs/python.md), and commit its output:

    python crates/ffcv-py/scripts/ffcv_api_names.py > crates/ffcv-py/tests/data/ffcv_api.json

A module's public names are its ``__all__`` if it has one, plus every public name its own
source binds at top level: classes, functions and assignments made there, and names it
imports from other FFCV modules (re-exports such as ``ffcv.DatasetWriter``). Names it
imports from elsewhere (``np``, ``Callable``) are not FFCV's API. ``__main__`` modules
are left out (importing one runs a program), and so are private (``_``) modules.
"""

import ast
import importlib
import inspect
import json
import pkgutil
import sys
import typing


def bound_names(source: str, package: str, module: str):
    """Public top-level names the module's source binds itself or takes from FFCV."""
    tree = ast.parse(source)
    names = []
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names.append(target.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
        elif isinstance(node, ast.ImportFrom):
            internal = node.level > 0 or (node.module or "").split(".")[0] == package
            if internal:
                names.extend(a.asname or a.name for a in node.names if a.name != "*")
    return [n for n in names if not n.startswith("_")]


def kind(value) -> str:
    if inspect.ismodule(value):
        return "module"
    if inspect.isclass(value):
        return "class"
    # Before Python 3.14 a `Union[...]` alias is callable (it raises when called), from 3.14
    # on it is not: an alias is its own kind, whatever the interpreter.
    if typing.get_origin(value) is not None:
        return "type alias"
    if callable(value):
        return "function"
    return "value"


def main(package: str = "ffcv") -> None:
    root = importlib.import_module(package)
    modules = [package] + sorted(
        m.name
        for m in pkgutil.walk_packages(root.__path__, prefix=package + ".")
        # `__main__` runs a program when imported; `_`-modules are private.
        if not m.name.endswith("__main__") and not any(p.startswith("_") for p in m.name.split("."))
    )
    try:
        from importlib.metadata import version

        installed = version(package)
    except Exception:
        installed = getattr(root, "__version__", None)
    out = {"package": package, "version": installed, "modules": {}}
    for name in modules:
        module = importlib.import_module(name)
        try:
            source = inspect.getsource(module)
        except (OSError, TypeError):
            source = ""
        names = set(getattr(module, "__all__", [])) | set(bound_names(source, package, name))
        entries = {}
        for n in sorted(names):
            if hasattr(module, n):
                entries[n] = kind(getattr(module, n))
        out["modules"][name] = entries
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
