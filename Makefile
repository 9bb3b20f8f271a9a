# tsrc — build, test and tools.  `make help` lists the targets.
#
#   make            build build/tsrc (installs missing tools first, saying what it does)
#   make demo       build tsrc and run the main example on the CPU
#   make check      build and run every test; last line "N passed, N failed"
#   make check SAN=1  the same under AddressSanitizer + UndefinedBehaviorSanitizer
#   make check-einsum  the reference executor against NumPy on 20000 random einsums
#   make check-native  native code (-O3; host CPU, x86-64-v4, x86-64-v3) against the reference
#                      executor on 20000 random einsums and 3000 random contractions
#   make check-approx  every float through tsrc's own exp, log and tanh: the stated ulp bounds
#   make fuzz       fuzz the front end, native compilation (to an object in memory), the data
#                   loaders and the model image reader, FUZZ_SECONDS each (default 60);
#                   FUZZ_TARGETS="parse compile data image"
#   make bench-shapes  time shape inference on generated 10..3000-layer MLPs
#   make install PREFIX=/usr/local   install tsrc, libtsr.a, tsr.h, tsr.pc, the CMake package, the stdlib, the docs,
#                                    the Python package and the data tools (share/tsrc/python, share/tsrc/tools)
#   make bench      tsrc-generated code vs OpenBLAS, NumPy and PyTorch (matmul, an elementwise
#                   chain, training steps, LeNet's convolutions); BENCH_ONLY="conv" (sections:
#                   matmul bmm ew train conv) runs some; other variables in tools/bench.sh
#   make check-gpu  the .out goldens, the examples and 200 random einsums as --target=cuda
#                   executables on the GPU against the reference executor (tests/gpu/); in two
#                   halves for a GPU machine without the toolchain: `make gpu-prepare` here
#                   (into build/gpu), then `sh tests/gpu/run.sh build/gpu` there
#   make bench-gpu  fp32 matmul 1024-8192 and the MLP step on the GPU vs cuBLAS and PyTorch
#                   (tools/bench/gpu/); halves: `make bench-gpu-prepare` (into build/bench-gpu),
#                   then `sh tools/bench/gpu/run.sh build/bench-gpu` on the GPU machine
#   make clean      remove build/
#
# Generated sources (never edited, never committed) go to build/gen/:
#   grammar/lexer.re        --re2c-->  build/gen/lexer.c
#   grammar/parser.y        --lemon--> build/gen/parser.c, parser.h
#   grammar/spec_lexer.re   --re2c-->  build/gen/spec_lexer.c
#   grammar/spec_parser.y   --lemon--> build/gen/spec_parser.c, spec_parser.h
#   stdlib/*.tsr            --embed--> build/gen/stdlib_blob.c (the library inside tsrc)

CC        ?= cc
LEMON     ?= lemon
RE2C      ?= re2c
LLVM_CONFIG ?= llvm-config-19
PYTHON    ?= /usr/bin/python3

BUILD     := build
GEN       := $(BUILD)/gen
SAN       ?=

WARNINGS  := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
             -Wpointer-arith -Wformat=2 -Wno-unused-parameter
CFLAGS    ?= -O2 -g
CFLAGS    += -std=c11 -D_GNU_SOURCE $(WARNINGS) -iquote compiler -iquote . -I$(GEN)
LDFLAGS   ?=
LDLIBS    += -lm -pthread
# Evaluated when a recipe runs (after tools/bootstrap.sh has installed LLVM on a fresh machine).
LLVM_CFLAGS = $(shell $(LLVM_CONFIG) --includedir 2>/dev/null)
LLVM_LIBS   = $(shell $(LLVM_CONFIG) --ldflags 2>/dev/null) $(shell $(LLVM_CONFIG) --libs 2>/dev/null)

# The runtime library that executables link (libtsr.a) is never instrumented: tsrc links
# programs with the plain system cc.  Under SAN=1, tsrc and the unit tests link an instrumented
# copy of the runtime (libtsr-san.a) instead.
RT_CFLAGS := -O2 -g -std=c11 -D_GNU_SOURCE $(WARNINGS)
HOST_RT    = $(BUILD)/libtsr.a

# Seconds each test program may run (tests/run.sh): the limit catches a hang, not slowness.  The
# slowest programs (the reference executor walking 16 MiB buffers, or a GPU schedule's grids)
# take 5-8 s alone on a 2.6 GHz Zen 4 core and up to twice that beside the second worker;
# the sanitizers slow the reference executor several times more.
TEST_TIMEOUT ?= 60

ifeq ($(SAN),1)
  TEST_TIMEOUT = 120
  HOST_RT  = $(BUILD)/libtsr-san.a
  BUILD   := build/san
  GEN     := $(BUILD)/gen
  CFLAGS  := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
             -fno-sanitize-recover=undefined -std=c11 -D_GNU_SOURCE $(WARNINGS) -iquote compiler -iquote . -I$(GEN)
  LDFLAGS += -fsanitize=address,undefined
endif

ifneq ($(V),1)
  Q := @
  say = @printf '  %-7s %s\n' $(1) $(2);
else
  Q :=
  say =
endif

GRAMMAR_Y  := $(wildcard grammar/*.y)
GRAMMAR_RE := $(wildcard grammar/*.re)
STDLIB_TSR := $(sort $(wildcard stdlib/*.tsr))
GEN_C      := $(patsubst grammar/%.y,$(GEN)/%.c,$(GRAMMAR_Y)) \
              $(patsubst grammar/%.re,$(GEN)/%.c,$(GRAMMAR_RE)) \
              $(GEN)/stdlib_blob.c
GEN_H      := $(patsubst grammar/%.y,$(GEN)/%.h,$(GRAMMAR_Y))

COMPILER_SRC := $(wildcard compiler/*/*.c)
LIB_OBJ    := $(patsubst %.c,$(BUILD)/obj/%.o,$(COMPILER_SRC)) \
              $(patsubst $(GEN)/%.c,$(BUILD)/obj/gen/%.o,$(GEN_C))
MAIN_OBJ   := $(BUILD)/obj/compiler/main.o
RUNTIME_SRC := $(wildcard runtime/*.c)
RUNTIME_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(RUNTIME_SRC))
RUNTIME_SAN_OBJ := $(patsubst runtime/%.c,$(BUILD)/obj/runtime-san/%.o,$(RUNTIME_SRC))
UNIT_SRC   := $(wildcard tests/unit/*_test.c)
UNIT_BIN   := $(patsubst tests/unit/%.c,$(BUILD)/unit/%,$(UNIT_SRC))

TOOLS_STAMP := $(BUILD)/.tools

.PHONY: all demo check check-einsum check-native check-approx unit fuzz clean help bootstrap bench-shapes bench install \
        check-gpu gpu-prepare bench-gpu bench-gpu-prepare
.DELETE_ON_ERROR:
.SECONDARY:

all: $(BUILD)/tsrc $(BUILD)/libtsr.a

help:
	@sed -n '1,/^$$/p' Makefile

# Install what a fresh Debian machine lacks (only when something is missing).
bootstrap $(TOOLS_STAMP): tools/bootstrap.sh
	$(Q)sh tools/bootstrap.sh
	$(Q)mkdir -p $(BUILD) && touch $(TOOLS_STAMP)

$(GEN)/%.c $(GEN)/%.h: grammar/%.y | $(TOOLS_STAMP)
	$(call say,LEMON,$<)
	$(Q)mkdir -p $(GEN)
	$(Q)$(LEMON) -q -d$(GEN) $<

$(GEN)/%.c: grammar/%.re $(GEN_H) | $(TOOLS_STAMP)
	$(call say,RE2C,$<)
	$(Q)mkdir -p $(GEN)
	$(Q)$(RE2C) -W -Werror --no-generation-date --no-version $< -o $@

# The standard library is compiled into tsrc (tools/embed.sh).
$(GEN)/stdlib_blob.c: $(STDLIB_TSR) tools/embed.sh
	$(call say,EMBED,stdlib)
	$(Q)mkdir -p $(GEN)
	$(Q)sh tools/embed.sh $@ $(STDLIB_TSR)

# The runtime library: position-independent, so it also links into shared objects.
$(BUILD)/obj/runtime/%.o: runtime/%.c
	$(call say,CC,$<)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(RT_CFLAGS) -fPIC -MMD -MP -c $< -o $@

$(BUILD)/libtsr.a: $(RUNTIME_OBJ)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/obj/runtime-san/%.o: runtime/%.c
	$(call say,CC,$<)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libtsr-san.a: $(RUNTIME_SAN_OBJ)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/obj/compiler/%.o: compiler/%.c $(GEN_H) | $(TOOLS_STAMP)
	$(call say,CC,$<)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -isystem $(LLVM_CFLAGS) -MMD -MP -c $< -o $@

# Lemon's template trips a few warnings that are not ours to fix.
$(BUILD)/obj/gen/%.o: $(GEN)/%.c $(GEN_H)
	$(call say,CC,$<)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -iquote compiler -Wno-unused-variable -Wno-missing-prototypes \
	    -Wno-implicit-fallthrough -MMD -MP -c $< -o $@

$(BUILD)/libtsrc.a: $(LIB_OBJ)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/tsrc: $(MAIN_OBJ) $(BUILD)/libtsrc.a $(HOST_RT) | $(BUILD)/libtsr.a
	$(call say,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) $^ -o $@ $(LLVM_LIBS) $(LDLIBS)

$(BUILD)/unit/%: tests/unit/%.c $(wildcard tests/unit/*.h) $(BUILD)/libtsrc.a $(HOST_RT)
	$(call say,CC,$<)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -Iruntime $(LDFLAGS) $< $(BUILD)/libtsrc.a $(HOST_RT) -o $@ $(LLVM_LIBS) $(LDLIBS)

unit: $(UNIT_BIN)

# The fuzz targets without libFuzzer (tests/fuzz/replay.c): `make check` replays their seeds and
# past findings.
FUZZ_REPLAY := $(patsubst %,$(BUILD)/fuzz-replay/%,parse compile data image)
$(BUILD)/fuzz-replay/%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c tests/fuzz/fuzz_common.c tests/fuzz/fuzz_common.h \
                        $(BUILD)/libtsrc.a $(HOST_RT)
	$(call say,CC,$<)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -iquote runtime -iquote tests/fuzz -isystem $(LLVM_CFLAGS) $(LDFLAGS) tests/fuzz/replay.c $< \
	    tests/fuzz/fuzz_common.c $(BUILD)/libtsrc.a $(HOST_RT) -o $@ $(LLVM_LIBS) $(LDLIBS)

# The whole test suite: golden tests and the C unit tests, one summary line at the end.
# (TSR_PTXAS=none: the hundreds of --target=cuda programs the tests build carry their PTX alone,
# not a cubin that ptxas would take seconds to make; tests/gpu/fake_driver.sh sets it for its
# own checks of the cubin)
check: $(BUILD)/tsrc $(UNIT_BIN) $(FUZZ_REPLAY)
	$(Q)TSR_PTXAS=none TSRC=$(BUILD)/tsrc UNIT_DIR=$(BUILD)/unit FUZZ_REPLAY_DIR=$(BUILD)/fuzz-replay OBJ_DIR=$(BUILD)/obj SAN=$(SAN) PYTHON=$(PYTHON) \
	    TEST_TIMEOUT=$(TEST_TIMEOUT) sh tests/run.sh

# The long differential sweep of the reference executor against NumPy's einsum: f32 tensors
# (tolerance 1e-4), then every tensor f64 (--dtype f64: against NumPy's float64 within the error
# bound of double-precision sums of products, tests/einsum/einsum_diff.py's header; about a minute),
# then every tensor bf16 and every tensor f16 (--dtype bf16, f16: exactly, NumPy's result rounded
# once to the type; about a minute each), then every tensor i32 and every tensor i64 (--dtype
# i32, i64: exactly, NumPy's wrapping integer einsum).
EINSUM_COUNT ?= 20000
EINSUM_INT_COUNT ?= 10000
EINSUM_F64_COUNT ?= 20000
EINSUM_HALF_COUNT ?= 20000
EINSUM_SEED ?= 2
check-einsum: $(BUILD)/tsrc
	$(Q)$(PYTHON) tests/einsum/einsum_diff.py --tsrc $(BUILD)/tsrc --count $(EINSUM_COUNT) --seed $(EINSUM_SEED)
	$(Q)$(PYTHON) tests/einsum/einsum_diff.py --tsrc $(BUILD)/tsrc --count $(EINSUM_F64_COUNT) --seed $(EINSUM_SEED) --dtype f64
	$(Q)$(PYTHON) tests/einsum/einsum_diff.py --tsrc $(BUILD)/tsrc --count $(EINSUM_HALF_COUNT) --seed $(EINSUM_SEED) --dtype bf16
	$(Q)$(PYTHON) tests/einsum/einsum_diff.py --tsrc $(BUILD)/tsrc --count $(EINSUM_HALF_COUNT) --seed $(EINSUM_SEED) --dtype f16
	$(Q)$(PYTHON) tests/einsum/einsum_diff.py --tsrc $(BUILD)/tsrc --count $(EINSUM_INT_COUNT) --seed $(EINSUM_SEED) --dtype i32
	$(Q)$(PYTHON) tests/einsum/einsum_diff.py --tsrc $(BUILD)/tsrc --count $(EINSUM_INT_COUNT) --seed $(EINSUM_SEED) --dtype i64

# The long differential sweeps of native code against the reference executor: random einsums
# of f32 tensors, the same of f64 tensors, of bf16 tensors and of f16 tensors (--dtype f64,
# bf16, f16, every value printed in full; sweep_gen.py's header says what they hold), of i32
# and of i64 tensors (--dtype i32, i64), and random contractions.
NATIVE_COUNT ?= 20000
NATIVE_F64_COUNT ?= 5000
NATIVE_HALF_COUNT ?= 3000
NATIVE_INT_COUNT ?= 2000
NATIVE_SEED ?= 2
CONTRACTION_LONG_COUNT ?= 3000
check-native: $(BUILD)/tsrc
	$(Q)PYTHON=$(PYTHON) sh tests/native_sweep.sh --tsrc $(BUILD)/tsrc --count $(NATIVE_COUNT) --seed $(NATIVE_SEED)
	$(Q)PYTHON=$(PYTHON) sh tests/native_sweep.sh --tsrc $(BUILD)/tsrc --count $(NATIVE_F64_COUNT) --seed $(NATIVE_SEED) --dtype f64
	$(Q)PYTHON=$(PYTHON) sh tests/native_sweep.sh --tsrc $(BUILD)/tsrc --count $(NATIVE_HALF_COUNT) --seed $(NATIVE_SEED) --dtype bf16
	$(Q)PYTHON=$(PYTHON) sh tests/native_sweep.sh --tsrc $(BUILD)/tsrc --count $(NATIVE_HALF_COUNT) --seed $(NATIVE_SEED) --dtype f16
	$(Q)PYTHON=$(PYTHON) sh tests/native_sweep.sh --tsrc $(BUILD)/tsrc --count $(NATIVE_INT_COUNT) --seed $(NATIVE_SEED) --dtype i32
	$(Q)PYTHON=$(PYTHON) sh tests/native_sweep.sh --tsrc $(BUILD)/tsrc --count $(NATIVE_INT_COUNT) --seed $(NATIVE_SEED) --dtype i64
	$(Q)$(PYTHON) tests/native/contractions.py --tsrc $(BUILD)/tsrc --count $(CONTRACTION_LONG_COUNT) --seed $(NATIVE_SEED)
	$(Q)$(PYTHON) tests/native/contractions.py --tsrc $(BUILD)/tsrc --count $(CONTRACTION_LONG_COUNT) --seed $(NATIVE_SEED) --dtype f64

# Every float through tsrc's own exp, log and tanh against libm in double precision: the error
# bounds compiler/ir/approx.h states (make check samples every 1021st float; this takes minutes).
check-approx: $(BUILD)/unit/approx_test
	$(Q)$(BUILD)/unit/approx_test --all

# Benchmarks (not tests): shape inference time per layer on generated MLPs.
bench-shapes: $(BUILD)/tsrc
	$(Q)sh tools/bench_shapes.sh $(BUILD)/tsrc

demo: $(BUILD)/tsrc
	$(Q)sh tools/demo.sh $(BUILD)/tsrc

# Fuzzing with libFuzzer (clang): four targets in turn (tools/fuzz.sh), each corpus seeded from
# the project's own programs, data files and images; exits 1 when a target finds something.
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_DIR     := build/fuzz
FUZZ_TARGETS ?=
fuzz: $(GEN_C) $(GEN_H)
	$(Q)sh tools/fuzz.sh "$(FUZZ_CC)" "$(FUZZ_SECONDS)" "$(FUZZ_DIR)" "$(GEN)" $(FUZZ_TARGETS)

# Installation: tsrc finds libtsr.a in ../lib beside its bin/ directory.
PREFIX  ?= /usr/local
DESTDIR ?=
VERSION := $(shell sed -n 's/^\#define TSRC_VERSION "\(.*\)"/\1/p' compiler/main.c)
install: $(BUILD)/tsrc $(BUILD)/libtsr.a
	$(Q)mkdir -p $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include \
	    $(DESTDIR)$(PREFIX)/share/tsrc/stdlib $(DESTDIR)$(PREFIX)/share/doc/tsrc/examples \
	    $(DESTDIR)$(PREFIX)/lib/cmake/tsrc $(DESTDIR)$(PREFIX)/share/tsrc/tools $(DESTDIR)$(PREFIX)/share/tsrc/python/tsr
	$(Q)install -m 755 $(BUILD)/tsrc $(DESTDIR)$(PREFIX)/bin/tsrc
	$(Q)install -m 644 $(BUILD)/libtsr.a $(DESTDIR)$(PREFIX)/lib/libtsr.a
	$(Q)install -m 644 runtime/tsr.h $(DESTDIR)$(PREFIX)/include/tsr.h
	$(Q)install -m 644 $(STDLIB_TSR) $(DESTDIR)$(PREFIX)/share/tsrc/stdlib/
	$(Q)install -m 644 tools/digits.py tools/gpt_data.py tools/gpt2_weights.py $(DESTDIR)$(PREFIX)/share/tsrc/tools/
	$(Q)install -m 644 runtime/python/setup.py $(DESTDIR)$(PREFIX)/share/tsrc/python/
	$(Q)install -m 644 $(wildcard runtime/python/tsr/*.py) $(DESTDIR)$(PREFIX)/share/tsrc/python/tsr/
	$(Q)install -m 644 README.md docs/*.md $(DESTDIR)$(PREFIX)/share/doc/tsrc/
	$(Q)install -m 644 $(wildcard docs/examples/*.tsr docs/examples/*.c) $(DESTDIR)$(PREFIX)/share/doc/tsrc/examples/
	$(Q)cp -R docs/examples/python docs/examples/cmake $(DESTDIR)$(PREFIX)/share/doc/tsrc/examples/
	$(Q)install -m 644 runtime/cmake/tsrcConfig.cmake $(DESTDIR)$(PREFIX)/lib/cmake/tsrc/tsrcConfig.cmake
	$(Q)sed -e 's|@VERSION@|$(VERSION)|' runtime/cmake/tsrcConfigVersion.cmake.in \
	    >$(DESTDIR)$(PREFIX)/lib/cmake/tsrc/tsrcConfigVersion.cmake
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' tools/tsr.pc.in \
	    >$(DESTDIR)$(PREFIX)/lib/pkgconfig/tsr.pc
	@echo "installed tsrc $(VERSION) in $(DESTDIR)$(PREFIX)"

# Benchmarks (not tests): generated code against OpenBLAS and NumPy (docs/performance.md).
bench: $(BUILD)/tsrc $(BUILD)/libtsr.a
	$(Q)sh tools/bench.sh $(BUILD)/tsrc $(BUILD)

# The GPU: tests and benchmarks, each built here (tsrc, LLVM, the CUDA toolkit) and run on the
# GPU (only sh, python3 and the driver needed there; the outputs are < 40 MiB together).
GPU_OUT       ?= $(BUILD)/gpu
GPU_ARCH      ?= sm_80
gpu-prepare: $(BUILD)/tsrc $(BUILD)/libtsr.a
	$(Q)PYTHON=$(PYTHON) TSR_GPU_ARCH=$(GPU_ARCH) sh tests/gpu/prepare.sh $(BUILD)/tsrc $(GPU_OUT)
check-gpu: gpu-prepare
	$(Q)sh tests/gpu/run.sh $(GPU_OUT)

BENCH_GPU_OUT   ?= $(BUILD)/bench-gpu
BENCH_GPU_SIZES ?= 1024 2048 4096 8192
bench-gpu-prepare: $(BUILD)/tsrc $(BUILD)/libtsr.a
	$(Q)BENCH_GPU_SIZES="$(BENCH_GPU_SIZES)" sh tools/bench/gpu/prepare.sh $(BUILD)/tsrc $(BUILD) $(BENCH_GPU_OUT)
bench-gpu: bench-gpu-prepare
	$(Q)sh tools/bench/gpu/run.sh $(BENCH_GPU_OUT)

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
