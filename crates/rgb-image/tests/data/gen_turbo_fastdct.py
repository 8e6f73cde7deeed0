"""Regenerates turbo_fastdct.json: JPEGs of assorted layouts and the RGB that
libjpeg-turbo's tjDecompress2(..., TJPF_RGB, TJFLAG_FASTDCT) gives for them
(FFCV's imdecode call), the reference for tests/image_jpeg_layouts.rs.

Dev-time only (not run by the tests). Needs Debian's libturbojpeg0 2.1.5 (the
version FFCV 1.0.2's fixtures were made with), numpy and
opencv-python-headless==4.10.0.84 (to encode the JPEGs).
"""
import base64
import ctypes
import hashlib
import json

import cv2
import numpy as np

TJ = ctypes.CDLL("libturbojpeg.so.0")
TJ.tjInitDecompress.restype = ctypes.c_void_p
TJ.tjDecompressHeader3.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ulong] + [ctypes.POINTER(ctypes.c_int)] * 4
TJ.tjDecompress2.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p,
                             ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
TJPF_RGB = 0
TJFLAG_FASTDCT = 2048


def turbo_fastdct(jpeg):
    h = TJ.tjInitDecompress()
    w, ht, ss, cs = (ctypes.c_int() for _ in range(4))
    assert TJ.tjDecompressHeader3(h, jpeg, len(jpeg), *(ctypes.byref(x) for x in (w, ht, ss, cs))) == 0
    out = np.zeros((ht.value, w.value, 3), np.uint8)
    rc = TJ.tjDecompress2(h, jpeg, len(jpeg), out.ctypes.data, w.value, 0, ht.value, TJPF_RGB, TJFLAG_FASTDCT)
    assert rc == 0, rc
    return out


def source(seed, h, w):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + y) * 127 // max(w + h - 2, 1)], -1)
    img = img + rng.integers(-20, 21, img.shape)
    if h > 4 and w > 4:
        img[h // 4: h // 2, w // 3: w // 2] = rng.integers(0, 256, 3)
    return np.clip(img, 0, 255).astype(np.uint8)


SAMPLING = {"420": 0x221111, "422": 0x211111, "440": 0x121111, "444": 0x111111, "411": 0x411111}


def main():
    cases = []
    layouts = [
        # (name, h, w, sampling, quality, extra params)
        ("420 odd size", 37, 53, "420", 90, []),
        ("420 two columns wide (box upsampling)", 21, 2, "420", 90, []),
        ("420 one row", 1, 30, "420", 90, []),
        ("420 3x3", 3, 3, "420", 75, []),
        ("422", 29, 41, "422", 90, []),
        ("422 two columns wide", 17, 4, "422", 90, []),
        ("440", 33, 27, "440", 90, []),
        ("444", 25, 31, "444", 95, []),
        ("420 quality 100 (all-ones tables)", 24, 24, "420", 100, []),
        ("420 quality 20", 40, 36, "420", 20, []),
        ("420 restart interval 2", 35, 70, "420", 90, [cv2.IMWRITE_JPEG_RST_INTERVAL, 2]),
        ("444 restart interval 1", 16, 40, "444", 90, [cv2.IMWRITE_JPEG_RST_INTERVAL, 1]),
        ("411 (general decoder)", 20, 44, "411", 90, []),
        ("progressive 420 (general decoder)", 30, 38, "420", 90, [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]),
        ("grayscale", 19, 23, "gray", 90, []),
    ]
    for k, (name, h, w, samp, q, extra) in enumerate(layouts):
        img = source(k, h, w)
        params = [cv2.IMWRITE_JPEG_QUALITY, q] + extra
        if samp == "gray":
            ok, enc = cv2.imencode(".jpg", cv2.cvtColor(img, cv2.COLOR_RGB2GRAY), params)
        else:
            params += [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, SAMPLING[samp]]
            ok, enc = cv2.imencode(".jpg", cv2.cvtColor(img, cv2.COLOR_RGB2BGR), params)
        assert ok
        jpeg = enc.tobytes()
        dec = turbo_fastdct(jpeg)
        assert dec.shape == (h, w, 3)
        cases.append({
            "name": name, "height": h, "width": w,
            "jpeg_b64": base64.b64encode(jpeg).decode(),
            "fastdct_sha256": hashlib.sha256(dec.tobytes()).hexdigest(),
            "fastdct_b64": base64.b64encode(dec.tobytes()).decode(),
        })
    doc = {"schema": "turbo-fastdct/1", "libturbojpeg": "2.1.5 (Debian 12)", "opencv_encode": cv2.__version__,
           "cases": cases}
    with open("turbo_fastdct.json", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
