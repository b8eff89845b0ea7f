/* kinfer.h - the public API (kinfer_public.h, installed as <kinfer.h>) plus the introspection
 * the kinfer command and the tests use: operator descriptions (core/layer.h) and each session
 * step's bound tensors. Not installed: it exposes the layer interface. */
#ifndef KINFER_H
#define KINFER_H

#include "kinfer_public.h"
#include "layer.h"

/* Operators in execution order (including pnnx.Input/pnnx.Output lines). */
int ki_model_n_ops(const ki_model *m);
const ki_op_desc *ki_model_op(const ki_model *m, int i);
/* Step k's operator, its bound input/output tensors and its last recorded time in seconds. */
const ki_op_desc *ki_session_step(const ki_session *s, int k, const ki_tensor **in,
                                  const ki_tensor **out, double *seconds);

#endif
