# fuzz.mk - libFuzzer targets (included from the Makefile, or `make -f Makefile -f tests/fuzz/fuzz.mk`).
#
#   make fuzz-expr  [FUZZ_SECONDS=60]  expression tokenizer/parser/evaluator (parser/)
#   make fuzz-param [FUZZ_SECONDS=60]  .pnnx.param reader + graph build (core/param*.c, graph.c)
#   make fuzz-zip   [FUZZ_SECONDS=60]  stored-zip reader + CRC (core/zip.c)
#   make fuzz-npy   [FUZZ_SECONDS=60]  .npy reader (cli/npy.c)
#   make fuzz-model [FUZZ_SECONDS=60]  whole model: load + session + one run (input: param NUL bin)
#   make fuzz-jpeg  [FUZZ_SECONDS=60]  JPEG decoder (cli/jpeg*.c)
#   make fuzz-build                    build every target without running it
#
# Each target is built into build/fuzz (clang, ASan+UBSan) and run on a fresh copy of its seed
# corpus (tests/fuzz/corpus_<name>, plus seeds taken from tests/data). Crashes are written to
# build/fuzz/<name>-crash-*; turn each into a unit test (tests/unit/test_hard*.c).
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_DIR     := build/fuzz
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS  := -std=c11 -D_DEFAULT_SOURCE -g -O1 -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_TARGETS := fuzz-expr fuzz-param fuzz-zip fuzz-npy fuzz-model fuzz-jpeg
FUZZ_EXPR_SRC := tests/fuzz/fuzz_expr.c $(wildcard parser/*.c) core/status.c
# Function names and punctuation, so mutations build real calls quickly.
FUZZ_EXPR_WORDS := abs acos acosh asin asinh atan atanh cos cosh sin sinh tan tanh exp log log10 \
  sqrt erf expm1 log1p ceil floor trunc round neg reciprocal rsqrt square sign int add sub mul \
  div floor_divide remainder fmod pow atan2 logaddexp max maximum min minimum and or xor lshift \
  rshift size torch.float torch.double torch.half torch.bfloat16 torch.long torch.int \
  torch.short torch.int8 torch.uint8 torch.bool True False None inf nan.0 @0 @1 @2 ( ) , [ ] \
  1.000000e-05 0.5 -1

.PHONY: fuzz-expr fuzz-param fuzz-zip fuzz-npy fuzz-model fuzz-jpeg fuzz-build
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

# --- the library under the fuzzer's instrumentation (objects in build/fuzz/obj) ---------------
FUZZ_OBJ_CFLAGS := -std=c11 -D_DEFAULT_SOURCE -D_FILE_OFFSET_BITS=64 -g -O1 -fno-omit-frame-pointer \
  -fopenmp -I/usr/include/x86_64-linux-gnu/openblas-openmp -I/usr/include/stb \
  -fsanitize=fuzzer-no-link $(FUZZ_SAN)
FUZZ_LIB_SRC := $(wildcard core/*.c) $(wildcard parser/*.c) $(wildcard layers/*.c)
FUZZ_LIB_OBJ := $(FUZZ_LIB_SRC:%.c=$(FUZZ_DIR)/obj/%.o)
FUZZ_LIBS    := -lstb -lopenblas -lm -fopenmp

$(FUZZ_DIR)/obj/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_OBJ_CFLAGS) -mavx2 -mfma -MMD -MP -c $< -o $@

$(FUZZ_DIR)/obj/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_OBJ_CFLAGS) -mavx512f -mavx512bw -mavx512vl -mavx2 -mfma -MMD -MP -c $< -o $@

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_OBJ_CFLAGS) -MMD -MP -c $< -o $@

# The depthwise kernels at -O0: their always-inlined row blocks make functions of 100+ KiB, which
# clang -O1 with ASan+UBSan took over 7 minutes (AVX2) and 2 (AVX-512) to compile, most of CI's
# fuzz stage; at -O0 about a minute and 5 s, every check still in place (docs/hardening.md).
$(FUZZ_DIR)/obj/layers/conv2d_dw_avx2.o $(FUZZ_DIR)/obj/layers/conv2d_dw_avx512.o: \
  FUZZ_OBJ_CFLAGS += -O0

$(FUZZ_DIR)/libkinfer.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_DIR)/fuzz_param $(FUZZ_DIR)/fuzz_zip $(FUZZ_DIR)/fuzz_model: $(FUZZ_DIR)/%: tests/fuzz/%.c \
  $(FUZZ_DIR)/libkinfer.a
	$(FUZZ_CC) $(FUZZ_OBJ_CFLAGS) -fsanitize=fuzzer -o $@ $^ $(FUZZ_LIBS)

$(FUZZ_DIR)/fuzz_npy: tests/fuzz/fuzz_npy.c $(FUZZ_DIR)/obj/cli/npy.o $(FUZZ_DIR)/libkinfer.a
	$(FUZZ_CC) $(FUZZ_OBJ_CFLAGS) -fsanitize=fuzzer -o $@ $^ $(FUZZ_LIBS)

# The JPEG decoder with a pixel limit of 2^20 (as fuzz_jpeg.c says); of the library it needs only
# the error record.
FUZZ_JPEG_OBJ := $(FUZZ_DIR)/obj/cli/jpeg.o $(FUZZ_DIR)/obj/cli/jpeg_scan.o \
  $(FUZZ_DIR)/obj/cli/jpeg_pixels.o $(FUZZ_DIR)/obj/core/status.o
$(FUZZ_DIR)/obj/cli/jpeg.o: FUZZ_OBJ_CFLAGS += -DKI_JPEG_MAX_PIXELS=1048576

$(FUZZ_DIR)/fuzz_jpeg: tests/fuzz/fuzz_jpeg.c $(FUZZ_JPEG_OBJ)
	$(FUZZ_CC) $(FUZZ_OBJ_CFLAGS) -fsanitize=fuzzer -o $@ $^

fuzz-build: $(FUZZ_DIR)/fuzz_expr $(FUZZ_DIR)/fuzz_param $(FUZZ_DIR)/fuzz_zip \
  $(FUZZ_DIR)/fuzz_npy $(FUZZ_DIR)/fuzz_model $(FUZZ_DIR)/fuzz_jpeg

# Seeds: the hand-made ones in tests/fuzz/corpus_<name> plus every small case in tests/data.
FUZZ_RUN = $(FUZZ_DIR)/fuzz_$(1) -max_total_time=$(FUZZ_SECONDS) -max_len=$(2) -timeout=10 \
  -rss_limit_mb=2048 -artifact_prefix=$(FUZZ_DIR)/$(1)- -print_final_stats=1 \
  $(FUZZ_DIR)/corpus_$(1)

fuzz-param: $(FUZZ_DIR)/fuzz_param
	sh tests/fuzz/seeds.sh param $(FUZZ_DIR)/corpus_param
	$(call FUZZ_RUN,param,16384) -dict=tests/fuzz/param.dict

fuzz-zip: $(FUZZ_DIR)/fuzz_zip
	sh tests/fuzz/seeds.sh zip $(FUZZ_DIR)/corpus_zip
	$(call FUZZ_RUN,zip,16384)

fuzz-npy: $(FUZZ_DIR)/fuzz_npy
	sh tests/fuzz/seeds.sh npy $(FUZZ_DIR)/corpus_npy
	$(call FUZZ_RUN,npy,16384)

fuzz-model: $(FUZZ_DIR)/fuzz_model
	sh tests/fuzz/seeds.sh model $(FUZZ_DIR)/corpus_model
	$(call FUZZ_RUN,model,16384) -dict=tests/fuzz/param.dict

fuzz-jpeg: $(FUZZ_DIR)/fuzz_jpeg
	sh tests/fuzz/seeds.sh jpeg $(FUZZ_DIR)/corpus_jpeg
	$(call FUZZ_RUN,jpeg,16384) -dict=tests/fuzz/jpeg.dict

-include $(shell find $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)
