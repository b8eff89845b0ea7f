#!/usr/bin/env python3
"""gen.py - regenerates the malformed-input corpus in this directory from the small valid cases in
tests/data (run from the repository root: python3 tests/malformed/gen.py). cases.txt is written
by hand; this script only makes the input files it names."""
import os
import struct
import zipfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, '..', 'data')
CONV = os.path.join(DATA, 'ops', 'conv_basic')


def rd(path):
    with open(path, 'rb') as f:
        return f.read()


def wr(name, data):
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(HERE, name), 'wb') as f:
        f.write(data)


PARAM = rd(os.path.join(CONV, 'model.pnnx.param')).decode()
BIN = rd(os.path.join(CONV, 'model.pnnx.bin'))
LINES = PARAM.splitlines()
CONV_LINE = LINES[3]


def with_conv(line):
    return '\n'.join(LINES[:3] + [line] + LINES[4:]) + '\n'


def stored_zip(entries):
    """A classic stored zip as older pnnx writes it (entries: list of (name, bytes))."""
    out, central = b'', b''
    for name, data in entries:
        n = name.encode()
        crc = zlib.crc32(data) & 0xffffffff
        off = len(out)
        out += struct.pack('<IHHHHHIIIHH', 0x04034b50, 0, 0, 0, 0, 0, crc, len(data), len(data),
                           len(n), 0) + n + data
        central += struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 0, 0, 0, 0, 0, 0, crc, len(data),
                               len(data), len(n), 0, 0, 0, 0, 0, off) + n
    eocd = struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, len(entries), len(entries), len(central),
                       len(out), 0)
    return out + central + eocd


W = 16 * 3 * 3 * 3 * 4
WEIGHT = b'\x00\x00\x80\x3f' * (W // 4)
BIAS = b'\x00' * 64


def params():
    wr('p_empty.pnnx.param', '')
    wr('p_bad_magic.pnnx.param', PARAM.replace('7767517', '7767518', 1))
    wr('p_binary.pnnx.param', bytes(range(256)) * 4)
    wr('p_no_counts.pnnx.param', '7767517\n')
    wr('p_ops_beyond_file.pnnx.param', PARAM.replace('\n3 2\n', '\n999999 2\n', 1))
    wr('p_ops_over_limit.pnnx.param', PARAM.replace('\n3 2\n', '\n99999999999 2\n', 1))
    wr('p_negative_count.pnnx.param', PARAM.replace('\n3 2\n', '\n-3 2\n', 1))
    wr('p_operands_mismatch.pnnx.param', PARAM.replace('\n3 2\n', '\n3 777\n', 1))
    wr('p_short_line.pnnx.param', with_conv('nn.Conv2d conv2d_0 1'))
    wr('p_missing_names.pnnx.param', with_conv('nn.Conv2d conv2d_0 1 1 0'))
    wr('p_nin_huge.pnnx.param', with_conv(CONV_LINE.replace(' 1 1 0 1 ', ' 99999 1 0 1 ', 1)))
    wr('p_dup_producer.pnnx.param',
       PARAM.replace('\n3 2\n', '\n4 3\n', 1).replace('pnnx.Output',
                                                      'nn.ReLU relu_x 1 1 0 1\npnnx.Output', 1))
    wr('p_undefined_operand.pnnx.param', PARAM.replace('1 0 1 #1=', '1 0 77 #77=', 1))
    wr('p_cycle.pnnx.param',
       '7767517\n4 4\npnnx.Input in 0 1 0\nnn.ReLU a 2 1 0 3 1\nnn.ReLU b 1 1 1 2\n'
       'nn.ReLU c 1 1 2 3\n'.replace('nn.ReLU a 2 1', 'torch.cat a 2 1') +
       'pnnx.Output out 1 0 3\n')
    wr('p_dup_opname.pnnx.param',
       '7767517\n4 3\npnnx.Input in 0 1 0 #0=(1,4)f32\nnn.ReLU r 1 1 0 1\nnn.ReLU r 1 1 1 2\n'
       'pnnx.Output out 1 0 2\n')
    wr('p_attr_1e12.pnnx.param',
       with_conv(CONV_LINE.replace('@weight=(16,3,3,3)f32', '@weight=(1000000,1000000)f32')))
    wr('p_attr_128g.pnnx.param',
       with_conv(CONV_LINE.replace('@bias=(16)f32', '@bias=(8,2147483648)f32')
                 .replace('@weight=(16,3,3,3)f32', '@weight=(8,2147483648)f32')))
    wr('p_attr_negative.pnnx.param',
       with_conv(CONV_LINE.replace('@weight=(16,3,3,3)f32', '@weight=(16,-3,3,3)f32')))
    wr('p_attr_bad_dtype.pnnx.param',
       with_conv(CONV_LINE.replace('@weight=(16,3,3,3)f32', '@weight=(16,3,3,3)f77')))
    wr('p_attr_dim_overflow.pnnx.param',
       with_conv(CONV_LINE.replace('@weight=(16,3,3,3)f32',
                                   '@weight=(16,3,99999999999999999999,3)f32')))
    wr('p_input_1e12.pnnx.param', PARAM.replace('0 1 0 #0=(1,3,20,24)f32',
                                                '0 1 0 #0=(1000000,1000000,1,1)f32', 1))
    wr('p_too_many_dims.pnnx.param', PARAM.replace('#0=(1,3,20,24)f32', '#0=(1,1,1,1,1,1,1,3,20,24)f32', 1))
    wr('p_bad_annotation.pnnx.param', PARAM.replace('#0=(1,3,20,24)f32', '#0=(1,3,20,24f32', 1))
    wr('p_annot_foreign.pnnx.param', with_conv(CONV_LINE + ' #99=(1)f32'))
    wr('p_key_not_input.pnnx.param', with_conv(CONV_LINE.replace('$input=0', '$input=5')))
    wr('p_item_no_eq.pnnx.param', with_conv(CONV_LINE.replace('bias=True', 'bias')))
    wr('p_dup_param.pnnx.param', with_conv(CONV_LINE + ' groups=1'))
    wr('p_nul_byte.pnnx.param', PARAM.replace('groups=1', 'groups=\x001', 1))
    wr('p_unsupported_op.pnnx.param', with_conv(CONV_LINE.replace('nn.Conv2d', 'nn.FancyConv', 1)))
    wr('p_conv_kernel_5x5.pnnx.param',
       with_conv(CONV_LINE.replace('@weight=(16,3,3,3)f32', '@weight=(16,3,5,5)f32')))
    wr('p_conv_zero_stride.pnnx.param', with_conv(CONV_LINE.replace('stride=(1,1)', 'stride=(0,0)')))
    wr('p_conv_no_kernel.pnnx.param', with_conv(CONV_LINE.replace('kernel_size=(3,3) ', '')))
    wr('p_conv_in_channels.pnnx.param', with_conv(CONV_LINE.replace('in_channels=3', 'in_channels=5')))
    wr('p_bad_expr.pnnx.param',
       '7767517\n3 2\npnnx.Input in 0 1 0 #0=(1,4)f32\n'
       'pnnx.Expression e 1 1 0 1 expr=add(@0,\npnnx.Output out 1 0 1\n')
    wr('p_expr_input_ref.pnnx.param',
       '7767517\n3 2\npnnx.Input in 0 1 0 #0=(1,4)f32\n'
       'pnnx.Expression e 1 1 0 1 expr=add(@0,@7)\npnnx.Output out 1 0 1\n')
    wr('p_no_output.pnnx.param', '7767517\n2 2\npnnx.Input in 0 1 0 #0=(1,4)f32\nnn.ReLU r 1 1 0 1\n')
    wr('p_huge_line.pnnx.param',
       with_conv(CONV_LINE + ''.join(' k%d=1' % i for i in range(5000))))
    # the functional forms, whose weights are inputs: a bad parameter, a bad weight, no broadcast
    two = '7767517\n4 3\npnnx.Input x 0 1 0\npnnx.Input w 0 1 1\n%s\npnnx.Output out 1 0 2\n'
    wr('p_f_conv2d_groups.pnnx.param',
       two % 'F.conv2d c 2 1 0 1 2 bias=None groups=0 stride=(1,1) $input=0 $weight=1')
    wr('p_f_linear_weight_1d.pnnx.param', two % 'F.linear l 2 1 0 1 2 bias=None $input=0 $weight=1')
    wr('p_f_pdist_broadcast.pnnx.param', two % 'F.pairwise_distance d 2 1 0 1 2 p=2.0 $x1=0 $x2=1')
    # a bin that matches the 5x5 declaration, so the layer itself must object
    wr('b_conv_5x5.pnnx.bin', stored_zip([('conv2d_0.bias', BIAS),
                                          ('conv2d_0.weight', b'\x00\x00\x80\x3f' * (16 * 3 * 5 * 5))]))


def bins():
    wr('b_empty.pnnx.bin', b'')
    wr('b_text.pnnx.bin', 'this is not a zip archive, just some text that is long enough\n')
    wr('b_truncated.pnnx.bin', BIN[:len(BIN) // 2])
    good = stored_zip([('conv2d_0.bias', BIAS), ('conv2d_0.weight', WEIGHT)])
    cd_off = struct.unpack('<I', good[-6:-2])[0]
    # entry 0's local-header offset points beyond the end of the file
    b = bytearray(good)
    struct.pack_into('<I', b, cd_off + 42, 0x7fffffff)
    wr('b_offset_outside.pnnx.bin', bytes(b))
    # entry 0 claims 4 GiB - 2 bytes of data
    b = bytearray(good)
    struct.pack_into('<II', b, cd_off + 20, 0xfffffffe, 0xfffffffe)
    wr('b_size_outside.pnnx.bin', bytes(b))
    b = bytearray(good)
    struct.pack_into('<H', b, cd_off + 10, 8)
    wr('b_deflated.pnnx.bin', bytes(b))
    b = bytearray(good)
    struct.pack_into('<HH', b, len(b) - 22 + 8, 0xfff0, 0xfff0)
    wr('b_count_huge.pnnx.bin', bytes(b))
    b = bytearray(good)
    struct.pack_into('<I', b, len(b) - 22 + 16, 0xffffffff)
    wr('b_zip64_no_locator.pnnx.bin', bytes(b))
    wr('b_missing_entry.pnnx.bin', stored_zip([('conv2d_0.bias', BIAS)]))
    wr('b_short_entry.pnnx.bin', stored_zip([('conv2d_0.bias', BIAS),
                                             ('conv2d_0.weight', WEIGHT[:100])]))
    b = bytearray(good)
    struct.pack_into('<I', b, cd_off + 46 + len('conv2d_0.bias'), 0x12345678)  # not a header
    wr('b_cd_garbage.pnnx.bin', bytes(b))


def npy(shape, descr='<f4', data=None, fortran='False', major=1, extra=''):
    hdr = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, %s}" % (descr, fortran, shape, extra)
    hdr += ' ' * ((64 - (len(hdr) + 11) % 64) % 64) + '\n'
    head = b'\x93NUMPY' + bytes([major, 0]) + struct.pack('<H', len(hdr)) + hdr.encode()
    return head + (data if data is not None else b'')


def npys():
    n = 3 * 20 * 24 * 4
    wr('n_empty.npy', b'')
    wr('n_bad_magic.npy', b'\x93NUMPZ\x01\x00' + b'\0' * 100)
    wr('n_version9.npy', npy('(1, 3, 20, 24)', data=b'\0' * n, major=9))
    b = bytearray(npy('(1, 3, 20, 24)', data=b'\0' * n))
    struct.pack_into('<H', b, 8, 0xffff)
    wr('n_header_past_end.npy', bytes(b))
    wr('n_fortran.npy', npy('(1, 3, 20, 24)', data=b'\0' * n, fortran='True'))
    wr('n_complex.npy', npy('(1, 3, 20, 24)', descr='<c8', data=b'\0' * n * 2))
    wr('n_big_endian.npy', npy('(1, 3, 20, 24)', descr='>f4', data=b'\0' * n))
    wr('n_shape_1e12.npy', npy('(1000000, 1000000)', data=b'\0' * 64))
    wr('n_shape_negative.npy', npy('(1, -3, 20, 24)', data=b'\0' * n))
    wr('n_short_data.npy', npy('(1, 3, 20, 24)', data=b'\0' * (n - 4)))
    wr('n_no_shape.npy', npy('(1, 3, 20, 24)', data=b'\0' * n).replace(b"'shape'", b"'shope'"))
    wr('n_seven_dims.npy', npy('(1, 1, 1, 1, 3, 20, 24)', data=b'\0' * n))
    wr('n_channels_4.npy', npy('(1, 4, 20, 24)', data=b'\0' * (n // 3 * 4)))
    wr('n_rank_3.npy', npy('(3, 20, 24)', data=b'\0' * n))
    wr('n_zero_dim.npy', npy('(0, 3, 20, 24)', data=b''))


def images():
    wr('i_empty.png', b'')
    wr('i_text.png', 'not an image\n' * 8)
    png = b'\x89PNG\r\n\x1a\n'
    ihdr = struct.pack('>IIBBBBB', 100000, 100000, 8, 0, 0, 0, 0)
    chunk = struct.pack('>I', 13) + b'IHDR' + ihdr
    chunk += struct.pack('>I', zlib.crc32(b'IHDR' + ihdr) & 0xffffffff)
    wr('i_huge.png', png + chunk)
    ihdr = struct.pack('>IIBBBBB', 28, 28, 8, 0, 0, 0, 0)
    chunk = struct.pack('>I', 13) + b'IHDR' + ihdr
    chunk += struct.pack('>I', zlib.crc32(b'IHDR' + ihdr) & 0xffffffff)
    wr('i_truncated.png', png + chunk + struct.pack('>I', 4000) + b'IDAT' + b'\x78\x9c')
    bmp = b'BM' + struct.pack('<IHHI', 70, 0, 0, 54) + struct.pack('<IiiHHIIiiII', 40, -2147483647,
                                                                      28, 1, 24, 0, 0, 0, 0, 0, 0)
    wr('i_bad_dims.bmp', bmp)
    wr('i_zero_width.pgm', 'P5\n0 28\n255\n')
    # JPEG, read by cli/jpeg.c: a frame of 65535 x 65535, a frame with no scan, a Huffman table
    # with two 1-bit codes (the second is all ones)
    def sof(w, h):
        return b'\xff\xc0' + struct.pack('>HBHHB', 11, 8, h, w, 1) + b'\x01\x11\x00'
    wr('i_jpeg_huge.jpg', b'\xff\xd8' + sof(65535, 65535) + b'\xff\xd9')
    wr('i_jpeg_no_scan.jpg', b'\xff\xd8' + sof(8, 8) + b'\xff\xd9')
    dht = b'\xff\xc4' + struct.pack('>HB', 21, 0) + bytes([2] + [0] * 15) + b'\x00\x01'
    wr('i_jpeg_bad_huffman.jpg', b'\xff\xd8' + dht + sof(8, 8) + b'\xff\xd9')


def exprs():
    wr('e_unbalanced.txt', 'add(@0,mul(@1,@2)')
    wr('e_unknown_func.txt', 'frobnicate(@0)')
    wr('e_deep.txt', 'neg(' * 2000 + '@0' + ')' * 2000)
    wr('e_bad_char.txt', 'add(@0,#1)')
    wr('e_input_index.txt', 'add(@99999999999999999999,1)')
    wr('e_missing_value.txt', 'add(@0,@1)')
    wr('e_arity.txt', 'add(@0)')


if __name__ == '__main__':
    params()
    bins()
    npys()
    images()
    exprs()
