# kinfer - build, test and tooling. `make help` lists the targets.
CC      ?= gcc
BUILD   ?= build/release
OPT     ?= -O2
# The target's Debian multiarch triplet (x86_64-linux-gnu, aarch64-linux-gnu, ...): where its
# OpenBLAS headers live, and whether the x86 kernels (*_avx2.c, *_avx512.c) are built at all.
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
CFLAGS_BASE := -std=c11 -D_DEFAULT_SOURCE -D_FILE_OFFSET_BITS=64 -g -fopenmp -fPIC \
  -Wall -Wextra -Wshadow -Wvla -Wstrict-prototypes -Wmissing-prototypes \
  -I/usr/include/$(MULTIARCH)/openblas-openmp -I/usr/include/stb
CFLAGS  ?= $(OPT) -DNDEBUG
ALL_CFLAGS = $(CFLAGS_BASE) $(CFLAGS) $(EXTRA_CFLAGS)
LDLIBS  = -lstb -lopenblas -lm -fopenmp $(EXTRA_LDFLAGS)

LIB_SRC := $(wildcard core/*.c) $(wildcard parser/*.c) $(wildcard layers/*.c)
ifeq ($(filter x86_64% i386% i686%,$(MULTIARCH)),)
# not x86: the generic kernels only (core/cpu.c reports the generic level)
LIB_SRC := $(filter-out %_avx2.c %_avx512.c,$(LIB_SRC))
endif
CLI_SRC := $(filter-out cli/main.c,$(wildcard cli/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/unit/test_*.c)
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)

.PHONY: all test test-run demo deps clean asan help format lint fuzz cross-test
all: kinfer

kinfer: $(BUILD)/kinfer
	@if [ "$(BUILD)" = "build/release" ]; then cp $(BUILD)/kinfer kinfer; fi

$(BUILD)/kinfer: $(BUILD)/cli/main.o $(BUILD)/libkinfer_cli.a $(BUILD)/libkinfer.a
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/libkinfer.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libkinfer_cli.a: $(CLI_OBJ)
	@rm -f $@
	ar rcs $@ $^

# ISA-specific kernels get their flags per file; everything else targets baseline x86-64.
$(BUILD)/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -mavx2 -mfma -MMD -MP -c $< -o $@

$(BUILD)/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -mavx512f -mavx512bw -mavx512vl -mavx2 -mfma -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libkinfer_cli.a $(BUILD)/libkinfer.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Wno-missing-prototypes -o $@ $^ -lcmocka $(LDLIBS)

# Unit tests: every tests/unit/test_*.c is a cmocka program; the runner sums their results.
test: deps
	@$(MAKE) --no-print-directory BUILD=$(BUILD) test-run

test-run: $(BUILD)/kinfer $(TEST_BIN)
	@BUILD=$(BUILD) sh tests/run_tests.sh $(TEST_BIN)

# The README's first command: install what is missing, build, classify the bundled digits.
demo: deps
	@$(MAKE) --no-print-directory kinfer
	./kinfer run samples/mnist_cnn/model.pnnx.param samples/mnist_cnn/model.pnnx.bin samples/digits \
	  --labels samples/mnist_cnn/labels.txt --topk 1

asan: deps
	$(MAKE) BUILD=build/asan OPT=-O1 CFLAGS="-O1 -fno-omit-frame-pointer" \
	  EXTRA_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all" \
	  EXTRA_LDFLAGS="-fsanitize=address,undefined" test-run

deps:
	@sh tests/deps.sh

# The generic build for aarch64 (Debian's cross compiler), its unit tests run under qemu-user
# through binfmt_misc. tests/cross-deps.sh installs what it needs (root).
cross-test:
	@sh tests/cross-deps.sh
	@$(MAKE) --no-print-directory CC=aarch64-linux-gnu-gcc BUILD=build/aarch64 test-run

format:
	clang-format -i $(LIB_SRC) $(wildcard core/*.h parser/*.h layers/*.h cli/*.[ch])

clean:
	rm -rf build kinfer

help:
	@echo "make            build ./kinfer"
	@echo "make demo       install missing packages, build, classify the bundled MNIST digits"
	@echo "make test       install missing packages, build and run the unit tests (cmocka)"
	@echo "make asan       the same under AddressSanitizer + UBSan (build/asan)"
	@echo "make deps       install missing Debian packages (root) or print the apt-get line"
	@echo "make fuzz       run every libFuzzer target for FUZZ_SECONDS (default 60) each"
	@echo "make cross-test build for aarch64 (generic kernels) and run the unit tests under qemu"
	@echo "make bench      time the shared networks (kinfer bench beside ONNX Runtime), update docs/performance.md"
	@echo "make format     clang-format the sources"
	@echo "BUILD=dir       build directory (default build/release)"

include tests/fuzz/fuzz.mk
include tests/bench/bench.mk

# All libFuzzer targets, FUZZ_SECONDS each.
fuzz: $(FUZZ_TARGETS)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
