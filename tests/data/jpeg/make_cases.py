#!/usr/bin/python3
"""Writes the JPEG decoder's test cases (tests/unit/test_jpeg.c): small JPEG files cut from the
sample photo bus.jpg, and for each one that kinfer decodes itself, Pillow's decoded pixels as a
lossless PNG (Pillow 9.4 decodes with libjpeg-turbo 2.1, the decoder cli/jpeg.c reproduces).
Run once from this directory with Debian's python3-pil (/usr/bin/python3 make_cases.py); the
files that Pillow cannot write (restart markers, 4:4:0 and other sampling factors, multi-scan,
SOF1, RGB and arithmetic-coded files) are made with cjpeg from libjpeg-turbo-progs
(apt-get install libjpeg-turbo-progs). Neither is needed to run the tests.

NAME.jpg + NAME.png: Pillow's convert("RGB") (or mode "L" for a gray file);
NAME_y.png: Pillow's draft("L"), libjpeg's gray output of a colour file (the Y channel);
damaged_*.jpg + .png: truncated files, wrong restart markers and flipped bits, decoded by
  libjpeg-turbo's djpeg (Pillow stops at the first missing byte instead of finishing the image as
  libjpeg does) with JSIMD_FORCENONE=1: on corrupt data whose coefficients overflow 16 bits its
  SIMD inverse DCT and its C one (which cli/jpeg.c follows) differ;
unsupported_*.jpg: kinds cli/jpeg.c leaves to stb_image (no reference)."""
import os
import random
import subprocess
import tempfile

from PIL import Image

SRC = "../../../../shared/images/bus.jpg"
photo = Image.open(SRC).convert("RGB")


def crop(w, h, x=220, y=430):
    return photo.crop((x, y, x + w, y + h))


def pillow(name, im, **kw):
    im.save(f"{name}.jpg", quality=kw.pop("quality", 90), **kw)


def cjpeg(name, im, *args):
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "in.ppm" if im.mode == "RGB" else "in.pgm")
        im.save(src)
        subprocess.run(["cjpeg", *args, "-outfile", f"{name}.jpg", src], check=True)


def scans(name, im, script, *args):
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write(script)
        f.flush()
        cjpeg(name, im, "-scans", f.name, *args)


# Pillow's subsampling: 2 = 4:2:0, 1 = 4:2:2, 0 = 4:4:4
for w, h in ((64, 48), (37, 29), (5, 3), (4, 4), (1, 1), (3, 7), (17, 2)):
    for sub, tag in ((2, "420"), (1, "422"), (0, "444")):
        pillow(f"c{tag}_{w}x{h}", crop(w, h), subsampling=sub)
    pillow(f"gray_{w}x{h}", crop(w, h).convert("L"))
# strong colour edges in tiny images: chroma rows of 2 samples (replicated, not "fancy") and
# the edge rows and columns of the upsampling
def stripes(w, h):
    im = Image.new("RGB", (w, h))
    im.putdata([((255, 0, 0), (0, 0, 255), (0, 255, 0))[(x + 2 * y) // 2 % 3]
                for y in range(h) for x in range(w)])
    return im


for w, h in ((4, 6), (3, 5), (6, 9)):
    for sub, tag in ((2, "420"), (1, "422")):
        pillow(f"stripes_c{tag}_{w}x{h}", stripes(w, h), subsampling=sub, quality=95)
    cjpeg(f"stripes_c440_{w}x{h}", stripes(w, h), "-sample", "1x2", "-quality", "95")
pillow("c420_q100_64x48", crop(64, 48, 40, 200), subsampling=2, quality=100)
pillow("c420_q20_opt_64x48", crop(64, 48, 500, 600), subsampling=2, quality=20, optimize=True)
# restart intervals: every MCU row, every 3 MCUs, every block of a gray file
cjpeg("restart_row_c420_53x35", crop(53, 35), "-restart", "1", "-sample", "2x2")
cjpeg("restart_3b_c422_53x35", crop(53, 35), "-restart", "3B", "-sample", "2x1")
cjpeg("restart_1b_gray_37x29", crop(37, 29).convert("L"), "-restart", "1B")
# sampling factors beyond Pillow's: 4:4:0, luma below chroma, a mix of all four relations
cjpeg("c440_37x29", crop(37, 29), "-sample", "1x2")
cjpeg("c440_64x48", crop(64, 48), "-sample", "1x2")
cjpeg("y11_c22_37x29", crop(37, 29), "-sample", "1x1,2x2,2x2")
cjpeg("y21_c12_c11_37x29", crop(37, 29), "-sample", "2x1,1x2,1x1")
# one scan per component (not interleaved), and Y alone then Cb and Cr together
scans("scans_3_c420_37x29", crop(37, 29), "0;\n1;\n2;\n", "-sample", "2x2")
scans("scans_1_2_c422_53x35", crop(53, 35), "0;\n1,2;\n", "-sample", "2x1", "-restart", "2B")
# 16-bit quantisers (quality 1 without -baseline): an extended sequential (SOF1) file
cjpeg("sof1_q1_37x29", crop(37, 29), "-quality", "1", "-sample", "2x2")
# RGB components (Adobe transform 0), no colour conversion
cjpeg("rgb_37x29", crop(37, 29), "-rgb")
for name in sorted(f[:-4] for f in os.listdir(".") if f.endswith(".jpg")):
    im = Image.open(f"{name}.jpg")
    (im if im.mode == "L" else im.convert("RGB")).save(f"{name}.png")
for name in ("c420_37x29", "c422_37x29", "c440_37x29", "y11_c22_37x29"):
    im = Image.open(f"{name}.jpg")
    im.draft("L", im.size)
    assert im.mode == "L" and im.size == (37, 29)
    im.save(f"{name}_y.png")

# left to stb_image: progressive, 4:1:1, CMYK, arithmetic coding
pillow("unsupported_progressive_37x29", crop(37, 29), progressive=True)
cjpeg("unsupported_c411_37x29", crop(37, 29), "-sample", "4x1")
crop(37, 29).convert("CMYK").save("unsupported_cmyk_37x29.jpg", quality=90)
cjpeg("unsupported_arith_37x29", crop(37, 29), "-arithmetic")

# damaged files, decoded by djpeg (see above)
def djpeg(name, data):
    with open(f"{name}.jpg", "wb") as f:
        f.write(data)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.ppm")
        env = dict(os.environ, JSIMD_FORCENONE="1")
        r = subprocess.run(["djpeg", "-ppm", "-outfile", out, f"{name}.jpg"], env=env,
                           stderr=subprocess.DEVNULL)
        assert r.returncode in (0, 2)  # 2: decoded with warnings
        Image.open(out).save(f"{name}.png")


base = open("c420_64x48.jpg", "rb").read()
for pct in (50, 80, 95):
    djpeg(f"damaged_cut{pct}_c420_64x48", base[: len(base) * pct // 100])
cjpeg("damaged_src", crop(80, 64, 100, 300), "-restart", "1B", "-sample", "2x2")
rst = open("damaged_src.jpg", "rb").read()
os.remove("damaged_src.jpg")
djpeg("damaged_cut50_rst_c420_80x64", rst[: len(rst) // 2])
at = [i for i in range(len(rst) - 1) if rst[i] == 0xFF and 0xD0 <= rst[i + 1] <= 0xD7]
# the n-th restart marker's number moved by d (ahead, behind, far) or replaced by another marker
for tag, n, code in (("ahead1", 9, lambda m: 0xD0 | (m + 1) & 7),
                     ("ahead3", 2, lambda m: 0xD0 | (m + 3) & 7),
                     ("behind1", 5, lambda m: 0xD0 | (m - 1) & 7),
                     ("behind2", 11, lambda m: 0xD0 | (m - 2) & 7),
                     ("eoi", 13, lambda m: 0xD9), ("reserved", 13, lambda m: 0x05)):
    b = bytearray(rst)
    b[at[n] + 1] = code(b[at[n] + 1])
    djpeg(f"damaged_rst_{tag}_c420_80x64", bytes(b))
djpeg("damaged_rst_missing_c420_80x64", rst[: at[7]] + rst[at[7] + 2 :])
# quantisers far too coarse for the coefficients coded: products beyond 16 bits, the inverse
# DCT's 64-bit path (no encoder writes this; only damage or a crafted file does)
b = bytearray(base)
dqt = b.find(b"\xff\xdb")
b[dqt + 5 : dqt + 69] = bytes([255] * 64)
djpeg("damaged_dqt255_c420_64x48", bytes(b))
rng = random.Random(1)
for k, src in enumerate((base, base, rst, rst)):
    b = bytearray(src)
    sos = b.find(b"\xff\xda")
    for _ in range(3):
        b[rng.randrange(sos + 20, len(b) - 2)] ^= 1 << rng.randrange(8)
    djpeg(f"damaged_bits{k}", bytes(b))
