#!/usr/bin/python3
"""Writes the torchvision references that tests/unit/test_cli.c compares `kinfer run --preprocess`,
`--resize`, `--crop` and `--bgr` against. Run once from this directory with Debian's
python3-torchvision (/usr/bin/python3 make_refs.py); the images are the sample photos of
../shared/images stored losslessly as PNG (Pillow's decoding of them), so that the references
can be checked from the same pixels whatever decodes the JPEG. bus.jpg and zidane.jpg here are
copies of those photos: test_cli.c checks kinfer from them as well, and test_jpeg.c checks that
cli/jpeg.c decodes them to exactly these PNGs."""
import numpy as np
from PIL import Image
from torchvision import transforms as T

SRC = "../../../../shared/images"
NORM = T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
IMAGENET = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), NORM])
for name in ("bus", "zidane"):
    im = Image.open(f"{SRC}/{name}.jpg").convert("RGB")
    im.save(f"{name}.png", optimize=True)
    im = Image.open(f"{name}.png")
    np.save(f"{name}_torchvision.npy", IMAGENET(im).unsqueeze(0).numpy())
# --resize 320x240 --crop 224 --bgr, no normalisation: Resize((240, 320)), CenterCrop(224),
# ToTensor, channels reversed
im = Image.open("zidane.png")
x = T.Compose([T.Resize((240, 320)), T.CenterCrop(224), T.ToTensor()])(im)
np.save("zidane_320x240_bgr.npy", np.ascontiguousarray(x.numpy()[::-1])[None])
