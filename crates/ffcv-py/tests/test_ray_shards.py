"""The Ray recipe of docs/writing.md (``examples/ray_write_shards.py``): three Ray tasks,
each writing one shard with ``--shard-index``, write the same bytes as one ``ffcv write
--shards 3``. Needs ``ray`` (not installed by verify: it is large; run by hand in a venv
that has it) and the built ``ffcv`` binary; skips without them."""

import filecmp
import importlib.util
import os
import pathlib
import shutil
import subprocess

import pytest

ray = pytest.importorskip("ray")

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "crates" / "ffcv-py" / "examples" / "ray_write_shards.py"


def ffcv_binary():
    given = os.environ.get("FFCV_BIN")
    if given:
        return given
    for profile in ("debug", "release"):
        candidate = ROOT / "target" / profile / "ffcv"
        if candidate.is_file():
            return str(candidate)
    return shutil.which("ffcv")


def test_ray_tasks_write_the_set_one_process_writes(tmp_path):
    ffcv = ffcv_binary()
    if ffcv is None:
        pytest.skip("no ffcv binary (cargo build -p ffcv-cli, or set FFCV_BIN)")
    spec = importlib.util.spec_from_file_location("ray_write_shards", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    source = ["synthetic", "--kind", "cifar-raw", "--samples", "300"]
    whole = tmp_path / "whole"
    whole.mkdir()
    subprocess.run([ffcv, "write", *source, str(whole / "train.beton"), "--shards", "3",
                    "--workers", "1"], check=True, capture_output=True)
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    example.main([str(tasks), "--shards", "3", "--ffcv", ffcv, "--", *source])
    names = sorted(p.name for p in whole.iterdir())
    assert names == [f"train-0000{i}-of-00003.beton" for i in range(3)]
    assert sorted(p.name for p in tasks.iterdir()) == names
    for name in names:
        assert filecmp.cmp(whole / name, tasks / name, shallow=False), name
