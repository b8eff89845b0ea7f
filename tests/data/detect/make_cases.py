#!/usr/bin/python3
"""Writes tests/data/detect/yolov8_layout: a YOLOv8-layout detector output (1, 4 + 3 classes, 300
boxes; cx, cy, w, h, then class scores, no objectness) passed through F.relu (its values are all
non-negative, so unchanged), and expected_dets.npy, the detections torchvision's batched_nms keeps
(rows of class, score, x1, y1, x2, y2, best first) at conf 0.25 and IoU 0.7, as ultralytics'
non_max_suppression does. Run from the repository root with /usr/bin/python3 (Debian's
python3-torch, python3-torchvision) and ../shared/tools beside the repository."""
import sys

sys.path.insert(0, "../shared/tools")
import numpy as np
import torch
import torch.nn.functional as F
import torchvision
from zoocase import Lambda, write_case

g = torch.Generator().manual_seed(7)
n = 300
cxy = torch.rand(2, n, generator=g) * 600 + 20
wh = torch.rand(2, n, generator=g) * 150 + 10
sc = torch.rand(3, n, generator=g) ** 3
x = torch.cat([cxy, wh, sc])[None]
write_case("tests/data/detect/yolov8_layout", Lambda(lambda s, x: F.relu(x)), [x])
xx = x[0]
conf, cls = xx[4:].max(0)
idx = torch.nonzero(conf >= 0.25)[:, 0]
b = torch.stack([xx[0] - xx[2] / 2, xx[1] - xx[3] / 2, xx[0] + xx[2] / 2, xx[1] + xx[3] / 2], 1)
sel = idx[torchvision.ops.batched_nms(b[idx], conf[idx], cls[idx], 0.7)[:300]]
exp = np.stack([cls[sel].float().numpy(), conf[sel].numpy(), *b[sel].T.numpy()], 1)
np.save("tests/data/detect/yolov8_layout/expected_dets.npy", exp.astype(np.float32))
