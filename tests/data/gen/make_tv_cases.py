#!/usr/bin/python3
"""Zoo cases for the torchvision operators (issue #22): torchvision.ops.DeformConv2d,
torchvision.ops.RoIAlign and the functions deform_conv2d and roi_align (pnnx.custom_op.*),
with PyTorch (torchvision's CPU kernels) as the oracle.

pnnx only converts these modules with torchvision's operator library loaded (customop=), so this
runs zoocase through a small pnnx wrapper that adds it. Run from the repository root:
    /usr/bin/python3 tests/data/gen/make_tv_cases.py
"""
import glob
import os
import stat
import sys
import tempfile

import torchvision

TOOLS = "/work/shared/tools"
LIB = glob.glob(os.path.join(os.path.dirname(torchvision.__file__), "_C*.so"))[0]
WRAP = os.path.join(tempfile.mkdtemp(), "pnnx")
with open(WRAP, "w") as f:
    f.write('#!/bin/sh\nexec %s/pnnx "$@" customop=%s\n' % (TOOLS, LIB))
os.chmod(WRAP, stat.S_IRWXU)
os.environ["PNNX"] = WRAP
sys.path.insert(0, TOOLS)

import torch  # noqa: E402
from zoocase import Lambda, r, write_case  # noqa: E402

OPS = "tests/data/ops"


def deform_cases():
    # DCNv2: offset and mask as inputs, 2 groups, 2 offset groups, bias; offsets of a few pixels so
    # taps leave the plane on every side.
    torch.manual_seed(1)
    dc = torchvision.ops.DeformConv2d(4, 6, 3, stride=1, padding=1, groups=2, bias=True)
    write_case(OPS + "/tv_deform_conv", Lambda(lambda s, x, o, m: s.dc(x, o, m), dc=dc),
               [r(1, 4, 6, 7), r(1, 2 * 2 * 9, 6, 7, lo=-3, hi=3), r(1, 2 * 9, 6, 7)],
               dyn_inputs=[r(2, 4, 5, 8), r(2, 2 * 2 * 9, 5, 8, lo=-3, hi=3), r(2, 2 * 9, 5, 8)],
               note="DeformConv2d(4, 6, 3, padding=1, groups=2)(x, offset (2 offset groups), mask)")
    # DCNv1: the offset computed by a conv, no mask, no bias; a 3x2 kernel, stride 2, dilation
    # (2, 1), padding (2, 1), 3 offset groups over 6 channels.
    torch.manual_seed(2)
    oc = torch.nn.Conv2d(6, 2 * 3 * 6, (3, 2), stride=2, padding=1)
    torch.nn.init.uniform_(oc.weight, -0.5, 0.5)
    dc = torchvision.ops.DeformConv2d(6, 5, (3, 2), stride=2, padding=(2, 1), dilation=(2, 1),
                                      bias=False)
    write_case(OPS + "/tv_deform_conv_v1", Lambda(lambda s, x: s.dc(x, s.oc(x)), dc=dc, oc=oc),
               [r(1, 6, 9, 10, lo=-2, hi=2)], dyn_inputs=[r(2, 6, 7, 12, lo=-2, hi=2)],
               note="DeformConv2d(6, 5, (3,2), stride=2, padding=(2,1), dilation=(2,1), "
                    "bias=False)(x, conv(x)), 3 offset groups")

    # the function (pnnx.custom_op.torchvision.deform_conv2d): weight and bias as pnnx.Attribute
    # operands, the offset an input, the mask computed (sigmoid of an input); 2 offset groups.
    torch.manual_seed(4)
    w = torch.nn.Parameter(r(4, 3, 3, 3))
    b = torch.nn.Parameter(r(4))
    write_case(OPS + "/tv_deform_conv_func",
               Lambda(lambda s, x, o, m: torchvision.ops.deform_conv2d(
                   x, o, s.w, s.b, stride=(1, 2), padding=(1, 0), dilation=(1, 2),
                   mask=torch.sigmoid(m)), w=w, b=b),
               [r(1, 6, 7, 9), r(1, 2 * 2 * 9, 7, 3, lo=-2, hi=2), r(1, 2 * 9, 7, 3, lo=-3, hi=3)],
               dyn_inputs=[r(2, 6, 5, 11), r(2, 2 * 2 * 9, 5, 4, lo=-2, hi=2),
                           r(2, 2 * 9, 5, 4, lo=-3, hi=3)],
               note="deform_conv2d(x, offset, w, b, stride=(1,2), padding=(1,0), dilation=(1,2), "
                    "mask=sigmoid(m))")
    # no mask, no bias (pnnx passes both as constant operands), 2 groups of weights.
    torch.manual_seed(5)
    w = torch.nn.Parameter(r(6, 2, 2, 2))
    write_case(OPS + "/tv_deform_conv_func_nomask",
               Lambda(lambda s, x, o: torchvision.ops.deform_conv2d(x, o, s.w, stride=2, padding=1),
                      w=w),
               [r(1, 4, 6, 7), r(1, 8, 4, 4, lo=-2, hi=2)],
               note="deform_conv2d(x, offset, w (6,2,2,2), stride=2, padding=1): groups 2")


def boxes(rows):
    return torch.tensor(rows, dtype=torch.float32)


def roi_cases():
    torch.manual_seed(3)
    # aligned, fixed 2x2 sampling, scale 0.5; boxes inside, across and past the borders.
    ra = torchvision.ops.RoIAlign((3, 4), spatial_scale=0.5, sampling_ratio=2, aligned=True)
    b1 = boxes([[0, 1.0, 2.0, 9.0, 10.0], [1, -3.5, -1.0, 5.0, 7.0], [0, 3, 3, 4, 12],
                [1, 10.0, 12.0, 22.0, 19.5], [0, 6.0, 5.0, 2.0, 1.0]])
    b2 = boxes([[2, 0.5, 0.5, 14.0, 9.0], [0, -2, -2, 30, 30], [1, 7, 3, 7.5, 3.2]])
    write_case(OPS + "/tv_roi_align", Lambda(lambda s, x, b: s.ra(x, b), ra=ra),
               [r(2, 3, 8, 9), b1], dyn_inputs=[r(3, 2, 7, 11), b2],
               note="RoIAlign((3,4), spatial_scale=0.5, sampling_ratio=2, aligned=True)")
    # not aligned (boxes at least 1x1), adaptive grid (ceil(box / bins)), scale 0.25.
    ra = torchvision.ops.RoIAlign((2, 3), spatial_scale=0.25, sampling_ratio=0, aligned=False)
    b1 = boxes([[0, 0.0, 0.0, 40.0, 30.0], [1, 4.0, 8.0, 5.0, 9.0], [1, -8, 10, 50, 70],
                [0, 20.5, 3.25, 31.0, 27.0], [1, 33.0, 1.0, 39.0, 39.0]])
    b2 = boxes([[0, 2.0, 2.0, 18.0, 30.0], [0, 0.0, 0.0, 3.0, 3.0]])
    write_case(OPS + "/tv_roi_align_adaptive", Lambda(lambda s, x, b: s.ra(x, b), ra=ra),
               [r(2, 4, 10, 10), b1], dyn_inputs=[r(1, 4, 9, 6), b2],
               note="RoIAlign((2,3), spatial_scale=0.25, sampling_ratio=0, aligned=False)")

    # the function (pnnx.custom_op.torchvision.roi_align): aligned with an adaptive grid; a box
    # given backwards has a negative size and an empty grid.
    b1 = boxes([[1, 2.0, 3.0, 13.0, 11.0], [0, 8.0, 9.0, 2.0, 1.0], [1, -4, -4, 3, 20],
                [0, 5.5, 0.25, 6.0, 15.75]])
    b2 = boxes([[0, 1.0, 1.0, 12.0, 12.0], [0, 0.0, 4.0, 30.0, 9.0]])
    write_case(OPS + "/tv_roi_align_func",
               Lambda(lambda s, x, b: torchvision.ops.roi_align(x, b, (3, 2), 0.75, -1, True)),
               [r(2, 3, 9, 8), b1], dyn_inputs=[r(1, 3, 12, 10), b2],
               note="torchvision.ops.roi_align(x, boxes, (3,2), 0.75, -1, True)")


if __name__ == "__main__":
    deform_cases()
    roi_cases()
