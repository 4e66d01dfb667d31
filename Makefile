# tapegrad: one build for the library, the examples, the tests and the benchmarks.
#
#   make          build everything (needs the system packages: see `make deps`)
#   make deps     install missing Debian packages (apt-get as root, sudo otherwise)
#   make test     deps + build + run the cmocka suite      (SANITIZE=1: ASan + UBSan)
#   make demo     deps + build + run the main program
#   make bench    deps + build + run the benchmarks (speed and memory targets live here)
#   make claims   deps + build + check the demos' claims over seeds, threads, kernel modes
#   make figures  deps + build + regenerate docs/figures/ (and check the docs' slow numbers)
#   make check-docs  build + check every marked number in docs/*.md (scripts/check_docs.sh)
#   make assignment [PARTS=a,b] [OUT=dir]   write a student tree (docs/coursework.md)
#   make grade [STUDENT=dir] [PARTS=a,b] [TIMEOUT=s]   grade a submission by tests/parts.tsv
#
# Layout: sources in precision/ autograd/ nn/ optim/ form libtapegrad.a; dist/ (training on
# many ranks, the only MPI code) forms libdist.a; run/ (a GPT training run assembled from its
# settings, on top of everything else) forms librun.a; the rooms data/ plan/ analysis/ cli/
# (training data, the memory model and fit search, measurements over runs, command lines from
# settings tables) form librooms.a;
# examples/common/ (the programs' plumbing) forms libexamples.a; every
# folder examples/NAME/ is one program build/bin/NAME; every tests/test_*.c is one test binary;
# every bench/*.c is one benchmark. A program, test or benchmark links MPI (and libdist.a) only
# when one of its sources includes a dist/ header; every other binary stays MPI-free.

SANITIZE ?= 0
ifeq ($(SANITIZE),1)
BUILD    ?= build-san
OPT      ?= -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
BUILD    ?= build
OPT      ?= -O3 -g
endif
# Native code is the point of a CPU trainer: the precision kernels need AVX2 or better to reach
# their throughput. Override with ARCH= (empty) for a portable build.
ARCH     ?= -march=native

# The GEMM libraries behind the products (autograd/gemm.h; measured by bench/bench_gemm.c, the
# table in docs/performance.md): auto (both, each product to the faster for its shape),
# openblas, or onednn (Debian's libdnnl-dev, no pkg-config file).
GEMM     ?= auto
ifeq ($(filter $(GEMM),auto openblas onednn),)
$(error GEMM=$(GEMM): choose auto, openblas or onednn)
endif

PKGS     := openblas cmocka libcjson
CC       ?= cc
CFLAGS   += -std=c11 -D_POSIX_C_SOURCE=200809L $(OPT) $(ARCH) -fopenmp -fno-trapping-math \
            -fno-math-errno -ffp-contract=off \
            -Wall -Wextra -I. -MMD -MP $(shell pkg-config --cflags $(PKGS) 2>/dev/null) \
            -DTAPEGRAD_SOURCE_DIR='"$(CURDIR)"'
# TAPEGRAD_SOURCE_DIR lets a program find the gnuplot script kept next to its source, from any
# working directory. -fno-trapping-math: nothing here reads the floating-point exception flags,
# and without it gcc will not vectorize a loop that picks between two computed values (vtanh's
# two branches, vexp's clamp) on AVX2, where it has no masked instructions: GELU alone was 37%
# of an AVX2 build's small step. It changes no value: every operation is still IEEE's, in the
# source's order. -fno-math-errno: nothing reads errno after a math function either, and with
# it sqrtf is one instruction that loops vectorize (AdamW's update, optim/adamw.c), where
# before each call went through libm for errno's sake. sqrt is correctly rounded either way.
# -ffp-contract=off: a multiply and an add stay two roundings unless the source says fmaf.
# Contraction is a choice the compiler makes per loop and per -march, so it would make an
# AVX-512 build and an AVX2 build differ in the last bits; the portable kernel mode
# (autograd/kernels.h) promises they do not. (It is already GCC's default under -std=c11;
# written here so that nothing, e.g. a switch to gnu11, quietly turns it on.)
LDLIBS   += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm
ifneq ($(GEMM),openblas)
CFLAGS   += -DTAPEGRAD_WITH_ONEDNN
LDLIBS   += -ldnnl
endif
ifeq ($(GEMM),auto)
CFLAGS   += -DTAPEGRAD_GEMM_AUTO
endif
# MPI's headers are on every compile's path (harmless: only dist/ includes mpi.h); its library
# is linked only into the binaries that use dist/ (MPI_BINS below).
CFLAGS   += $(shell pkg-config --cflags ompi-c 2>/dev/null)
MPI_LIBS := $(shell pkg-config --libs ompi-c 2>/dev/null)
LDFLAGS  += -fopenmp $(filter -fsanitize%,$(OPT))

LIB_SRC  := $(wildcard precision/*.c autograd/*.c nn/*.c optim/*.c)
ROOM_SRC := $(wildcard data/*.c plan/*.c analysis/*.c cli/*.c)
EX_SRC   := $(wildcard examples/common/*.c)
PROGS    := $(filter-out common,$(notdir $(patsubst %/,%,$(dir $(wildcard examples/*/*.c)))))
TESTS    := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/test_*.c))
BENCHES  := $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))
BINS     := $(addprefix $(BUILD)/bin/,$(PROGS))

DIST_SRC := $(wildcard dist/*.c)
# run/ (a training run, --parallel included) calls dist/: including either links MPI.
USES_MPI := $(shell grep -l '^\#include "\(dist\|run\)/' examples/*/*.c tests/test_*.c bench/*.c 2>/dev/null)
MPI_BINS := $(sort $(foreach f,$(filter examples/%,$(USES_MPI)),$(BUILD)/bin/$(notdir $(patsubst %/,%,$(dir $(f))))) \
              $(patsubst %.c,$(BUILD)/%,$(filter tests/% bench/%,$(USES_MPI))))

LIB      := $(BUILD)/lib/libtapegrad.a
EXLIB    := $(BUILD)/lib/libexamples.a
ROOMLIB  := $(BUILD)/lib/librooms.a
DISTLIB  := $(BUILD)/lib/libdist.a
RUNLIB   := $(BUILD)/lib/librun.a
RUN_SRC  := $(wildcard run/*.c)
OBJ       = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

.PHONY: all deps test demo bench figures clean check-tests check-docs assignment grade fuzz
# Object files of tests and benchmarks are built by a chain of pattern rules, which would make
# them "intermediate" and deleted after linking; keep them so a second build does nothing.
.SECONDARY:
all: $(BINS) $(TESTS) $(BENCHES)

deps:
	@GEMM=$(GEMM) sh scripts/deps.sh

# The tests grade hostile submissions in the grader's sandbox (test_coursework): bubblewrap too.
test:
	@GEMM=$(GEMM) sh scripts/deps.sh grade
	@$(MAKE) --no-print-directory check-tests

# test_mpi_faults starts train_gpt under mpirun itself; tests/check_docs.sh runs the quick part of
# check-docs with the programs and benchmarks.
check-tests: $(TESTS) $(BINS) $(BENCHES)
	@BUILD=$(BUILD) SANITIZE=$(SANITIZE) sh tests/run.sh $(TESTS) tests/check_docs.sh

# Every number marked in docs/*.md against what its command prints now, in the portable kernel
# mode (scripts/check_docs.sh: the quick commands; make figures reruns the slow ones).
check-docs: $(BINS) $(BENCHES)
	@sh scripts/check_docs.sh --build $(BUILD)

demo: deps
	@$(MAKE) --no-print-directory $(BINS)
	@sh examples/demo.sh $(BUILD)

bench: deps
	@$(MAKE) --no-print-directory all
	@sh bench/run.sh $(BUILD)

# The demos' headline claims over seeds 1-5 x 1, 2 threads x portable, fast kernels: a table of
# PASS/FAIL rows (bench/claims.sh; SEEDS=, THREADS=, KERNELS=, CLAIMS= narrow it). Long.
claims: deps
	@$(MAKE) --no-print-directory $(BINS) $(BUILD)/bench/bench_checkpoint
	@sh bench/claims.sh $(BUILD)

# The snapshot readers under libFuzzer, FUZZ_SECONDS each (docs/gpt.md, tests/fuzz/).
fuzz: deps
	@sh scripts/fuzz.sh

# The figures and the docs' numbers come from the portable kernels: the same bits on every CPU.
figures: deps
	@$(MAKE) --no-print-directory all
	@TAPEGRAD_KERNELS=portable sh docs/figures.sh $(BUILD)
	@sh scripts/check_docs.sh --build $(BUILD) --slow

# Coursework (docs/coursework.md): the student tree, and its grading.
OUT      ?= build/assignment
# In a student tree (made by scripts/assignment.sh) `make grade` grades the tree itself.
STUDENT  ?= $(if $(wildcard .tapegrad-assignment),.,$(OUT))
TIMEOUT  ?= 300
assignment:
	@[ -f scripts/assignment.sh ] || { echo "make assignment: a student tree cannot make one" >&2; exit 1; }
	@sh scripts/assignment.sh --out $(OUT) $(if $(PARTS),--parts $(PARTS)) \
	    $(if $(SOLUTIONS),--solutions $(SOLUTIONS))

# deps with "grade" adds bubblewrap, the grader's sandbox (docs/coursework.md, "Grading").
grade:
	@GEMM=$(GEMM) sh scripts/deps.sh grade
	@sh scripts/grade.sh --student $(STUDENT) --timeout $(TIMEOUT) $(if $(PARTS),--parts $(PARTS))

$(LIB): $(call OBJ,$(LIB_SRC)) $(BUILD)/lib/libtapegrad.members
	@mkdir -p $(dir $@)
	@rm -f $@
	$(AR) rcs $@ $(filter %.o,$^)

$(EXLIB): $(call OBJ,$(EX_SRC)) $(BUILD)/lib/libexamples.members
	@mkdir -p $(dir $@)
	@rm -f $@
	$(AR) rcs $@ $(filter %.o,$^)

$(DISTLIB): $(call OBJ,$(DIST_SRC)) $(BUILD)/lib/libdist.members
	@mkdir -p $(dir $@)
	@rm -f $@
	$(AR) rcs $@ $(filter %.o,$^)

$(RUNLIB): $(call OBJ,$(RUN_SRC)) $(BUILD)/lib/librun.members
	@mkdir -p $(dir $@)
	@rm -f $@
	$(AR) rcs $@ $(filter %.o,$^)

$(ROOMLIB): $(call OBJ,$(ROOM_SRC)) $(BUILD)/lib/librooms.members
	@mkdir -p $(dir $@)
	@rm -f $@
	$(AR) rcs $@ $(filter %.o,$^)

# Each archive's list of sources, rewritten only when it changes: a source removed (or added)
# rebuilds the archive even when no object is newer, so that a removed file's old object does
# not stay in it and clash at link time with the code that replaced it.
$(BUILD)/lib/%.members: FORCE
	@mkdir -p $(dir $@)
	@echo '$(MEMBERS_$*)' | cmp -s - $@ || echo '$(MEMBERS_$*)' > $@
MEMBERS_libtapegrad := $(LIB_SRC)
MEMBERS_libexamples := $(EX_SRC)
MEMBERS_libdist     := $(DIST_SRC)
MEMBERS_librun      := $(RUN_SRC)
MEMBERS_librooms    := $(ROOM_SRC)
FORCE:
.PHONY: FORCE

# The binaries that use dist/ or run/: librun.a and libdist.a before the other libraries, and
# MPI's library (librooms.a again after librun.a, which calls into the rooms).
RUN_LINK := $(RUNLIB) $(ROOMLIB) $(DISTLIB) $(MPI_LIBS)
$(MPI_BINS): $(RUNLIB) $(DISTLIB)
$(MPI_BINS): LINK_MPI = $(RUN_LINK)

# gemm.o is compiled for one GEMM= choice: a build folder remembers which, and a different
# GEMM= recompiles it (and relinks everything).
GEMM_STAMP := $(BUILD)/gemm-$(GEMM).stamp
$(GEMM_STAMP):
	@mkdir -p $(BUILD)
	@rm -f $(BUILD)/gemm-*.stamp
	@touch $@
$(BUILD)/obj/autograd/gemm.o: $(GEMM_STAMP)

# Objects depend on the flags they were compiled with: $(BUILD)/cflags holds the last ones, and
# is rewritten (so everything recompiles) when they change, e.g. a new flag in this Makefile.
# Make alone would recompile only the sources touched since.
FLAGS_FILE := $(BUILD)/cflags
ifneq ($(file <$(FLAGS_FILE)),$(CC) $(CFLAGS))
$(shell mkdir -p $(BUILD))
$(file >$(FLAGS_FILE),$(CC) $(CFLAGS))
endif
$(FLAGS_FILE): ;

$(BUILD)/obj/%.o: %.c $(FLAGS_FILE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# One program per folder: every .c file in examples/NAME/ links into build/bin/NAME.
.SECONDEXPANSION:
$(BUILD)/bin/%: $$(call OBJ,$$(wildcard examples/%/*.c)) $(EXLIB) $(ROOMLIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(filter %.o,$^) $(EXLIB) $(ROOMLIB) $(LINK_MPI) $(LIB) $(LDLIBS) -o $@

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(EXLIB) $(ROOMLIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(filter %.o,$^) $(EXLIB) $(ROOMLIB) $(LINK_MPI) $(LIB) $(LDLIBS) -o $@

# A test that runs train_gpt as a user would: the program is built first, and found in $(BUILD).
$(BUILD)/tests/test_train_gpt_cli: $(BUILD)/bin/train_gpt
$(BUILD)/obj/tests/test_train_gpt_cli.o: CFLAGS += -DTAPEGRAD_BUILD_DIR='"$(CURDIR)/$(BUILD)"'
$(BUILD)/tests/test_wait_policy: $(BUILD)/bin/train_gpt
$(BUILD)/tests/test_portable_train: $(BUILD)/bin/train_gpt
$(BUILD)/obj/tests/test_portable_train.o: CFLAGS += -DTAPEGRAD_BUILD_DIR='"$(CURDIR)/$(BUILD)"'
$(BUILD)/obj/tests/test_wait_policy.o: CFLAGS += -DTAPEGRAD_BUILD_DIR='"$(CURDIR)/$(BUILD)"'
$(BUILD)/tests/test_fit_largest_cli: $(BUILD)/bin/fit_largest
$(BUILD)/obj/tests/test_fit_largest_cli.o: CFLAGS += -DTAPEGRAD_BUILD_DIR='"$(CURDIR)/$(BUILD)"'

# The programs whose flags come from a settings table, run as a user would (the same way).
SETTINGS_CLI_PROGS := backprop_strategies data_parallel lora_finetune loss_scaling lr_scaling \
                      memory_calculator number_formats
$(BUILD)/tests/test_settings_cli: $(addprefix $(BUILD)/bin/,$(SETTINGS_CLI_PROGS))
$(BUILD)/obj/tests/test_settings_cli.o: CFLAGS += -DTAPEGRAD_BUILD_DIR='"$(CURDIR)/$(BUILD)"'
# test_schema_cli reads every program's settings table (--settings-table) against the schemas.
$(BUILD)/tests/test_schema_cli: $(BINS)
$(BUILD)/obj/tests/test_schema_cli.o: CFLAGS += -DTAPEGRAD_BUILD_DIR='"$(CURDIR)/$(BUILD)"'

# The fuzz corpora's replay (tests/fuzz/): the train_load harness includes train_gpt.c, so the
# test links run/ (the options among it) and MPI, and turns exit() into a jump back to the
# harness.
$(BUILD)/tests/test_fuzz_replay: $(RUNLIB) $(DISTLIB)
$(BUILD)/tests/test_fuzz_replay: LINK_MPI = $(RUN_LINK)
$(BUILD)/tests/test_fuzz_replay: LDFLAGS += -Wl,--wrap=exit

# The libFuzzer harnesses themselves, built by `make fuzz` (scripts/fuzz.sh) with clang into
# build-fuzz: the same sources, LLVMFuzzerTestOneInput switched on.
$(BUILD)/fuzz/fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(EXLIB) $(ROOMLIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer $(filter %.o,$^) $(EXLIB) $(ROOMLIB) $(LINK_MPI) $(LIB) $(LDLIBS) -o $@
$(BUILD)/obj/tests/fuzz/%.o: CFLAGS += -DTAPEGRAD_LIBFUZZER
$(BUILD)/fuzz/fuzz_train_load: $(RUNLIB) $(DISTLIB)
$(BUILD)/fuzz/fuzz_train_load: LINK_MPI = $(RUN_LINK)
$(BUILD)/fuzz/fuzz_train_load: LDFLAGS += -Wl,--wrap=exit
$(BUILD)/fuzz/fuzz_settings_agree: $(RUNLIB) $(DISTLIB)
$(BUILD)/fuzz/fuzz_settings_agree: LINK_MPI = $(RUN_LINK)
$(BUILD)/fuzz/fuzz_settings_agree: LDFLAGS += -Wl,--wrap=exit

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(EXLIB) $(ROOMLIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(filter %.o,$^) $(EXLIB) $(ROOMLIB) $(LINK_MPI) $(LIB) $(LDLIBS) -o $@

clean:
	rm -rf build build-san build-avx2 build-fuzz build-onednn build-avx2-onednn build-openblas \
	       build-avx2-openblas

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
