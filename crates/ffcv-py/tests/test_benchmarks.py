"""``python -m ffcv_rs.benchmarks`` runs a bounded measurement and reports it."""

import json
import subprocess
import sys

from conftest import fixture


def test_benchmark_module_is_bounded_and_reports_json():
    out = subprocess.run(
        [sys.executable, "-m", "ffcv_rs.benchmarks", fixture("images_jpg"), "--batch-size", "4",
         "--num-workers", "1", "--max-batches", "3", "--warmup", "1", "--epochs", "2",
         "--decoder", "image=center-crop:16x16", "--json"],
        capture_output=True, text=True, timeout=120, check=True)
    result = json.loads(out.stdout)
    assert [e["samples"] for e in result["epochs"]] == [12, 12]
    assert result["stats"]["epochs"] == 3
    assert result["median_samples_per_s"] > 0
