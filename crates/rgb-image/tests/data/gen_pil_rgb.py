"""Digests of Pillow's `Image.open(p).convert("RGB")` for the image_sources test folder.

usage (reference env, see docs/images.md):
  FFCV_IMAGE_FOLDER_OUT=/tmp/imgs cargo test -p rgb-image --test it image_sources
  $ANCHORS/venv/bin/python gen_pil_rgb.py /tmp/imgs > pil_rgb.json
Unreadable files (Pillow raises) are left out."""
import hashlib, json, os, sys
import numpy as np
from PIL import Image

root = sys.argv[1]
out = {}
for cls in sorted(os.listdir(root)):
    for name in sorted(os.listdir(os.path.join(root, cls))):
        path = os.path.join(root, cls, name)
        try:
            with Image.open(path) as im:
                a = np.asarray(im.convert("RGB"))
        except Exception as e:  # truncated and non-image files
            print(f"skipped {cls}/{name}: {e}", file=sys.stderr)
            continue
        out[f"{cls}/{name}"] = {"shape": list(a.shape), "sha256": hashlib.sha256(a.tobytes()).hexdigest()}
json.dump(out, sys.stdout, indent=1, sort_keys=True)
print()
