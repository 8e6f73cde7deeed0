"""Every public module and name of FFCV 1.0.2 imports under ffcv_rs at the same path.

The list (tests/data/ffcv_api.json) was generated from the real FFCV 1.0.2 by
scripts/ffcv_api_names.py; names are facts, so it is committed. A name of FFCV's that
has no counterpart here still imports, and using it raises an error naming the ffcv_rs
way (checked for each such internal below)."""

import importlib
import inspect
import json
import os
import typing

import pytest

from ffcv_rs._compat import UnsupportedInternal

API = json.load(open(os.path.join(os.path.dirname(__file__), "data", "ffcv_api.json")))
ENTRIES = [(module, name, kind) for module, names in sorted(API["modules"].items())
           for name, kind in sorted(names.items())]


def ours(module: str) -> str:
    return "ffcv_rs" + module[len("ffcv"):]


def test_the_list_is_ffcv_1_0_2s_and_whole():
    assert API["package"] == "ffcv" and API["version"] == "1.0.2"
    assert len(API["modules"]) == 62
    assert len(ENTRIES) == 366


@pytest.mark.parametrize("module", sorted(API["modules"]))
def test_every_module_imports(module):
    importlib.import_module(ours(module))


@pytest.mark.parametrize("module,name,kind", ENTRIES, ids=[f"{m}.{n}" for m, n, _ in ENTRIES])
def test_every_name_imports_with_its_kind(module, name, kind):
    value = getattr(importlib.import_module(ours(module)), name)
    if kind == "class":
        assert inspect.isclass(value), f"{module}.{name} should be a class"
    elif kind == "function":
        assert callable(value), f"{module}.{name} should be callable"
    elif kind == "type alias":
        assert typing.get_origin(value) is not None, f"{module}.{name} should be a type alias"
    elif kind == "module":
        assert inspect.ismodule(value)


def test_top_level_reexports():
    import ffcv_rs

    assert ffcv_rs.DatasetWriter.__module__ == "ffcv_rs.writer"
    assert ffcv_rs.Loader.__module__ == "ffcv_rs.loader.loader"


UNSUPPORTED = [
    ("ffcv_rs.pipeline.graph", "Graph"),
    ("ffcv_rs.pipeline.graph", "DecoderNode"),
    ("ffcv_rs.memory_allocator", "MemoryAllocator"),
    ("ffcv_rs.memory_managers.process_cache.schedule", "Schedule"),
    ("ffcv_rs.memory_managers.process_cache.schedule", "compute_schedule"),
    ("ffcv_rs.memory_managers.process_cache.page_reader", "PageReader"),
    ("ffcv_rs.traversal_order.quasi_random", "generate_order_inner"),
]


@pytest.mark.parametrize("module,name", UNSUPPORTED)
def test_internals_without_counterpart_say_what_to_use(module, name):
    thing = getattr(importlib.import_module(module), name)
    with pytest.raises(UnsupportedInternal) as info:
        thing()
    text = str(info.value)
    assert "no counterpart in ffcv_rs" in text and ("ffcv_rs" in text.split(":", 1)[1]
                                                    or "Loader" in text or "ffcv " in text)


def test_the_api_table_in_the_docs_is_up_to_date():
    import subprocess
    import sys

    script = os.path.join(os.path.dirname(__file__), "..", "scripts", "api_table.py")
    run = subprocess.run([sys.executable, script, "--check"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
