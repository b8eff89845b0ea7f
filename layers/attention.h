/* attention.h - what nn.MultiheadAttention's layer (attention.c) and the FLOP count of `kinfer
 * bench` / `kinfer info` (cli/bench_flops.c) both read from an operator. */
#ifndef KI_ATTENTION_H
#define KI_ATTENTION_H

#include "../core/layer.h"

/* The query, key and value inputs of op by position (an attn_mask, bound by `$attn_mask` or by
 * its key, is not one of them) into idx[0..2]: with one input all three are it, with two the key
 * and the value are the second (pnnx's export of mha(q, kv, kv)). Returns how many positional
 * inputs it took (at most three; 0 when op has none). */
int ki_mha_inputs(const ki_op_desc *op, int idx[3]);

#endif
