# kinfer - build, test and tooling. `make help` lists the targets.
CC      ?= gcc
BUILD   ?= build/release
OPT     ?= -O2
# The target's Debian multiarch triplet (x86_64-linux-gnu, aarch64-linux-gnu, ...): where its
# OpenBLAS headers live, and whether the x86 kernels (*_avx2.c, *_avx512.c) are built at all.
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
# -falign-functions=64: every function starts a 64-byte line, so a kernel's loops keep their
# place in the fetch lines whatever the size of the code linked before it (an unrelated change
# elsewhere had made mobilenet_v2's 7x7 small-output layers 7-10 % slower; docs/performance.md).
CFLAGS_BASE := -std=c11 -D_DEFAULT_SOURCE -D_FILE_OFFSET_BITS=64 -g -fopenmp -pthread -fPIC \
  -falign-functions=64 -Wall -Wextra -Wshadow -Wvla -Wstrict-prototypes -Wmissing-prototypes \
  -I/usr/include/$(MULTIARCH)/openblas-openmp -I/usr/include/stb
# On x86, -fvect-cost-model=dynamic: GCC 12's -O2 vectorizes only the loops its very cheap model
# takes, which left the expression evaluator's and other plain-C element loops scalar (vit_tiny
# 0.95x, the text encoder 0.94x, mobilenet_v3_small 0.97x with it; the same bits, as it neither
# reassociates nor contracts). Not for aarch64, whose GCC 12 stops with an internal error on
# test_softmax.c with it.
VECTORIZE := $(if $(filter x86_64% i386% i686%,$(MULTIARCH)),-fvect-cost-model=dynamic)
CFLAGS  ?= $(OPT) $(VECTORIZE) -DNDEBUG
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

.PHONY: all test test-run demo deps clean asan help format lint fuzz cross-test install install-test
all: kinfer

kinfer: $(BUILD)/kinfer
	@if [ "$(BUILD)" = "build/release" ]; then cp $(BUILD)/kinfer kinfer; fi

$(BUILD)/kinfer: $(BUILD)/cli/main.o $(BUILD)/libkinfer_cli.a $(BUILD)/libkinfer.a
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/libkinfer.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The shared library: the same objects (built -fPIC), OpenBLAS and OpenMP as its dependencies.
$(BUILD)/libkinfer.so: $(LIB_OBJ)
	$(CC) $(ALL_CFLAGS) -shared -Wl,-soname,libkinfer.so.0 -o $@ $^ -lopenblas -lm -fopenmp

$(BUILD)/libkinfer_cli.a: $(CLI_OBJ)
	@rm -f $@
	ar rcs $@ $^

# ISA-specific kernels get their flags per file; everything else targets baseline x86-64. Objects
# depend on this file too, so that a change of flags rebuilds them all.
$(BUILD)/%_avx2.o: %_avx2.c Makefile
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -mavx2 -mfma -MMD -MP -c $< -o $@

$(BUILD)/%_avx512.o: %_avx512.c Makefile
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -mavx512f -mavx512bw -mavx512vl -mavx2 -mfma -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.c Makefile
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/tests/%: tests/unit/%.c tests/unit/cpu_level.c $(BUILD)/libkinfer_cli.a $(BUILD)/libkinfer.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Wno-missing-prototypes -o $@ $^ -lcmocka $(LDLIBS)

# Unit tests: every tests/unit/test_*.c is a cmocka program; the runner sums their results.
test: deps
	@$(MAKE) --no-print-directory BUILD=$(BUILD) test-run

# INSTALL_TEST=0 (sanitizer and cross builds): no staged install, whose example the host's plain
# compiler builds.
INSTALL_TEST ?= 1
test-run: $(BUILD)/kinfer $(TEST_BIN) $(BUILD)/libkinfer.so
	@if [ "$(INSTALL_TEST)" = 1 ]; then sh tests/install_test.sh $(BUILD); fi
	@BUILD=$(BUILD) sh tests/run_tests.sh $(TEST_BIN)

# The README's first command: install what is missing, build, classify the bundled digits.
demo: deps
	@$(MAKE) --no-print-directory kinfer
	./kinfer run samples/mnist_cnn/model.pnnx.param samples/mnist_cnn/model.pnnx.bin samples/digits \
	  --labels samples/mnist_cnn/labels.txt --topk 1

asan: deps
	$(MAKE) BUILD=build/asan OPT=-O1 CFLAGS="-O1 -fno-omit-frame-pointer" \
	  EXTRA_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all" \
	  EXTRA_LDFLAGS="-fsanitize=address,undefined" INSTALL_TEST=0 test-run

deps:
	@sh tests/deps.sh

# make install PREFIX=... [DESTDIR=...]: the kinfer command, libkinfer.so / .a, the public header
# (core/kinfer_public.h as <kinfer.h>, with the three it includes), kinfer.pc and the man page.
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCDIR ?= $(PREFIX)/include/kinfer
install: $(BUILD)/kinfer $(BUILD)/libkinfer.so $(BUILD)/libkinfer.a
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCDIR) \
	  $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BUILD)/kinfer $(DESTDIR)$(PREFIX)/bin/kinfer
	install -m 755 $(BUILD)/libkinfer.so $(DESTDIR)$(LIBDIR)/libkinfer.so.0
	ln -sf libkinfer.so.0 $(DESTDIR)$(LIBDIR)/libkinfer.so
	install -m 644 $(BUILD)/libkinfer.a $(DESTDIR)$(LIBDIR)/libkinfer.a
	install -m 644 core/kinfer_public.h $(DESTDIR)$(INCDIR)/kinfer.h
	install -m 644 core/status.h core/tensor.h core/cpu.h $(DESTDIR)$(INCDIR)/
	install -m 644 docs/kinfer.1 $(DESTDIR)$(PREFIX)/share/man/man1/kinfer.1
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@INCDIR@|$(INCDIR)|' \
	  tests/kinfer.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/kinfer.pc

# Installs into a scratch prefix and builds and runs samples/c_api/classify.c against it with
# pkg-config, as a user would (tests/install_test.sh).
install-test: $(BUILD)/kinfer $(BUILD)/libkinfer.so $(BUILD)/libkinfer.a
	@sh tests/install_test.sh $(BUILD)

# The generic build for aarch64 (Debian's cross compiler), its unit tests run under qemu-user
# through binfmt_misc. tests/cross-deps.sh installs what it needs (root).
cross-test:
	@sh tests/cross-deps.sh
	@$(MAKE) --no-print-directory CC=aarch64-linux-gnu-gcc BUILD=build/aarch64 INSTALL_TEST=0 test-run

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
	@echo "make install    PREFIX=/usr/local: kinfer, libkinfer.so/.a, <kinfer.h>, kinfer.pc, man page"
	@echo "make bench      time the shared networks (kinfer bench beside ONNX Runtime), update docs/performance.md"
	@echo "make format     clang-format the sources"
	@echo "BUILD=dir       build directory (default build/release)"

include tests/fuzz/fuzz.mk
include tests/bench/bench.mk

# All libFuzzer targets, FUZZ_SECONDS each.
fuzz: $(FUZZ_TARGETS)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
