# fuzz.mk - libFuzzer targets (included from the Makefile, or `make -f Makefile -f tests/fuzz/fuzz.mk`).
#
#   make fuzz-expr [FUZZ_SECONDS=60]   build build/fuzz/fuzz_expr (clang, ASan+UBSan) and run it on
#                                      a fresh copy of tests/fuzz/corpus_expr; crashes are
#                                      written to build/fuzz/crash-* (turn each into a unit test).
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_DIR     := build/fuzz
FUZZ_CFLAGS  := -std=c11 -D_DEFAULT_SOURCE -g -O1 -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_EXPR_SRC := tests/fuzz/fuzz_expr.c $(wildcard parser/*.c) core/status.c
# Function names and punctuation, so mutations build real calls quickly.
FUZZ_EXPR_WORDS := abs acos acosh asin asinh atan atanh cos cosh sin sinh tan tanh exp log log10 \
  sqrt erf expm1 log1p ceil floor trunc round neg reciprocal rsqrt square sign int add sub mul \
  div floor_divide remainder fmod pow atan2 logaddexp max maximum min minimum and or xor lshift \
  rshift size torch.float torch.double torch.half torch.bfloat16 torch.long torch.int \
  torch.short torch.int8 torch.uint8 torch.bool True False None inf nan.0 @0 @1 @2 ( ) , [ ] \
  1.000000e-05 0.5 -1

.PHONY: fuzz-expr
$(FUZZ_DIR)/fuzz_expr: $(FUZZ_EXPR_SRC) $(wildcard parser/*.h) core/status.h core/ckd.h
	@mkdir -p $(FUZZ_DIR)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $(FUZZ_EXPR_SRC) -lm

$(FUZZ_DIR)/expr.dict: tests/fuzz/fuzz.mk
	@mkdir -p $(FUZZ_DIR)
	@rm -f $@
	@for w in $(patsubst %,'%',$(FUZZ_EXPR_WORDS)); do printf '"%s"\n' "$$w" >> $@; done

fuzz-expr: $(FUZZ_DIR)/fuzz_expr $(FUZZ_DIR)/expr.dict
	rm -rf $(FUZZ_DIR)/corpus_expr
	mkdir -p $(FUZZ_DIR)/corpus_expr
	cp tests/fuzz/corpus_expr/* $(FUZZ_DIR)/corpus_expr/
	$(FUZZ_DIR)/fuzz_expr -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=10 \
	  -dict=$(FUZZ_DIR)/expr.dict -artifact_prefix=$(FUZZ_DIR)/ -print_final_stats=1 \
	  $(FUZZ_DIR)/corpus_expr
