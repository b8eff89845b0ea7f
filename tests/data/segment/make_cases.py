#!/usr/bin/python3
"""Writes tests/data/segment/tiny: a small segmenter (a 3x3 convolution from 3 channels to 5 class
scores per pixel, input (1, 3, 16, 20)) with PyTorch's output, for `kinfer run --task segment`
(tests/unit/test_cli.c). Run from the repository root with /usr/bin/python3 and ../shared/tools
beside the repository."""
import sys

sys.path.insert(0, "../shared/tools")
import torch
import torch.nn as nn
from zoocase import r, write_case

torch.manual_seed(3)
write_case("tests/data/segment/tiny", nn.Conv2d(3, 5, 3, padding=1), [r(1, 3, 16, 20)])
