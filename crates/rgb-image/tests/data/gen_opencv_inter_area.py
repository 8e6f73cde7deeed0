"""Regenerates opencv_inter_area.json: cv2.resize(..., INTER_AREA) outputs for
assorted sizes, the reference for tests/image_resize.rs.

Dev-time only (not run by the tests). Needs opencv-python-headless==4.10.0.84
and numpy. Source pixels are the little-endian bytes of splitmix64(seed, 0),
splitmix64(seed, 1), ... (the fixtures' gen_bytes), optionally smoothed so
the cases cover both noise and gradients.
"""
import hashlib
import json
import random

import cv2
import numpy as np

M = (1 << 64) - 1


def sm64(seed, i):
    z = (seed + (i + 1) * 0x9E3779B97F4A7C15) & M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)


def gen_bytes(seed, n):
    words = (n + 7) // 8
    return b"".join(sm64(seed, i).to_bytes(8, "little") for i in range(words))[:n]


def main():
    rnd = random.Random(20261129)
    sizes = [
        # (sh, sw, dh, dw): fixed cases for each OpenCV path
        (64, 64, 32, 32), (62, 40, 31, 20), (48, 48, 16, 16), (60, 36, 15, 9),
        (64, 32, 32, 32), (32, 64, 32, 16), (35, 35, 32, 32), (84, 84, 32, 32),
        (53, 71, 32, 32), (100, 30, 7, 29), (33, 17, 11, 16), (20, 20, 32, 32),
        (7, 5, 32, 32), (16, 40, 32, 32), (40, 16, 32, 32), (1, 1, 4, 4),
        (1, 9, 3, 2), (9, 1, 2, 3), (32, 32, 32, 32), (13, 31, 13, 30),
        (3, 3, 7, 11), (24, 24, 64, 64), (10, 100, 64, 10),
    ]
    for _ in range(40):
        sizes.append((rnd.randint(1, 70), rnd.randint(1, 70), rnd.randint(1, 70), rnd.randint(1, 70)))
    cases = []
    for k, (sh, sw, dh, dw) in enumerate(sizes):
        seed = 1000 + k
        src = np.frombuffer(gen_bytes(seed, sh * sw * 3), dtype=np.uint8).reshape(sh, sw, 3)
        smooth = k % 2 == 1
        if smooth:
            src = cv2.blur(src, (5, 5))
        dst = cv2.resize(src, (dw, dh), interpolation=cv2.INTER_AREA)
        assert dst.shape == (dh, dw, 3)
        cases.append({
            "src_h": sh, "src_w": sw, "dst_h": dh, "dst_w": dw, "seed": seed, "smooth": smooth,
            "src_sha256": hashlib.sha256(src.tobytes()).hexdigest(),
            "dst_sha256": hashlib.sha256(dst.tobytes()).hexdigest(),
            "src_b64": None,
        })
        if smooth:
            # blur is OpenCV's too; ship its result so the test need not reimplement it.
            import base64
            cases[-1]["src_b64"] = base64.b64encode(src.tobytes()).decode()
    doc = {
        "schema": "opencv-inter-area/1",
        "opencv": cv2.__version__,
        "source": "gen_bytes(seed, h*w*3) (splitmix64 words, little-endian); smooth cases ship src_b64",
        "cases": cases,
    }
    with open("opencv_inter_area.json", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
