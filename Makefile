# Makefile - builds the libraries (common/ and one per chapter), every chapter's programs, the tests and the benchmarks.
#
#   make            build everything (build/)
#   make run        build and run every chapter in order on its quick default (out/)
#   make run-01     run one chapter
#   make test       install missing test dependencies, build, run the cmocka suites and
#                   tests/test_*.sh (the ladder of the libraries: tools/ladder.sh)
#   make test-san   the same suites under AddressSanitizer + UndefinedBehaviorSanitizer
#   make test-backends  the suites once per backend (naive, avx2, avx512, neon)
#   make test-valgrind  the suites under valgrind memcheck (0 errors, no definitely lost blocks)
#   make fuzz       every libFuzzer target in tests/fuzz/ FUZZ_SECONDS (default 60) s each, after
#                   replaying its corpus; prints executions and findings per target (clang, ASan+UBSan)
#   make bench      benchmarks (bench/results/)
#   make twin       PyTorch cross-checks (tools/)
#   make golden     regenerate the PyTorch golden vectors (tests/golden/)
#   make coursework student trees with TODO stubs (CHAPTER=NN: one chapter; out/coursework/)
#   make grade      run the coursework graders (in a student tree: its score table)
#   make submit     in a student tree: the tarball to hand in (STUDENT=id the first time)
#   make grade-submissions DIR=dir  the teacher's gradebook of a folder of submissions
#   make coursework-check  every chapter's student tree: builds warning-free, stubs 0 points,
#                   each solution alone its own points, all of them full marks (CHAPTER=NN: one)
#   make readme     rewrite the READMEs' results tables from out/*/results.json (after make run)
#   make figures    redraw the texts' pictures through chapters/FIGURES.tsv (CHAPTER=NN: one chapter)
#   make figures-check  the make-run pictures in img/ against a fresh make run's, byte for byte
#   make doc-check  every command the READMEs show: the cheap ones run (after make run), the rest's flags checked
#   make compare    chapters 01, 02, 03, 06 on the same seq2seq tasks and budget (about 30 min; out/compare/)
#   make length-ood trained on reverse 5-40, tested on 41-80: three positions and chapter 02 (out/length_ood/)
#   make gpt-variants  post-LN, RMSNorm, SwiGLU, ReLU against chapter 06's GPT (out/gpt_variants/)
#   make gpt-moe       a mixture of experts against dense MLPs on chapter 06's GPT (out/gpt_moe/)
#   make gpt-mlp       the GPT without its MLP, at a third of the parameters and at equal parameters (out/gpt_mlp/)
#   make attention-cost     one attention layer's time and memory against N: full, fused, window, BigBird (out/attention_cost/)
#   make attention-quality  the GPT with full, window and BigBird attention on Brown and on a copy task (out/attention_quality/)
#   make sparse-patterns    the pictures of the sparse patterns (out/sparse_patterns/)
#   make vit-norms          layer norm, RMSNorm and batch norm in chapter 07's ViT, three seeds (out/vit_norms/)
#   make vit-linformer      full attention against Linformer in chapter 07's ViT, three seeds (out/vit_linformer/)
#   make vit-data-size      the ViT, CNN and MLP on 1,000 to 55,000 training images, three seeds (out/vit_data_size/)
#   make caption-compare  chapter 07's three captioners at the same budget (out/caption_compare/)
#   make caption-encoders   the captioner's ViT against a CNN's grid: scratch, pretrained, frozen (out/caption_encoders/)
#   make gpt-genre          the pretrained GPT fine-tuned, probed, against scratch on Brown's genres, three seeds (out/gpt_genre/)
#   make clean
#
# Warnings are errors when CI is set (CI=true make test) or with STRICT=1.
# OMP=0 builds without OpenMP (one thread, the same results; in build-noomp/),
# CC=clang with clang (build-clang/; tools/deps.sh clang). macOS and AArch64
# are detected (below).

CC      ?= cc
# -O3: the same bits as -O2 (no fast-math, no contraction: -ffp-contract=off below), and the
# recurrent chapters' scalar loops (gates, tanh, the additive score) about 15% faster
OPT     ?= -O3
# OMP=1 (the default): the kernels' loops share out their work on OpenMP
# threads. OMP=0: no OpenMP at all (no -fopenmp, no OpenMP library linked):
# one thread, the bits of an OpenMP build on one thread (common/util/openmp.h).
# Its `#pragma omp` lines are then ignored, so gcc's -Wunknown-pragmas is off
# in that build only.
OMP     ?= 1
# The machine: Linux or macOS (Darwin); x86_64, or AArch64 (aarch64; arm64 on a
# Mac). ARCH=aarch64 CC=aarch64-linux-gnu-gcc builds the AArch64 tree on x86.
OS      := $(shell uname -s)
ARCH    ?= $(shell uname -m)
# A clang build and a build without OpenMP each get a directory of their own
# (build-clang, build-noomp, build-clang-noomp): no build links another's objects.
BUILD_TAG := $(if $(findstring clang,$(CC)),-clang)$(if $(filter 0,$(OMP)),-noomp)
BUILD   ?= build$(BUILD_TAG)

# macOS: Apple's clang has no OpenMP of its own. Homebrew's libomp (brew
# install libomp) gives it: -Xpreprocessor -fopenmp, its omp.h and -lomp.
# Without libomp the build is OMP=0, and make says so once. Homebrew's other
# headers and libraries (cmocka) are not on Apple's default paths either.
ifeq ($(OS),Darwin)
HOMEBREW := $(shell brew --prefix 2>/dev/null)
LIBOMP   := $(shell brew --prefix libomp 2>/dev/null)
ifeq ($(OMP),1)
ifeq ($(wildcard $(LIBOMP)/include/omp.h),)
override OMP := 0
ifeq ($(MAKELEVEL),0)
$(info macOS without Homebrew's libomp: building without OpenMP, on one thread (brew install libomp gives threads))
endif
endif
endif
endif

ifeq ($(OMP),0)
OPENMP_CFLAGS := -Wno-unknown-pragmas
OPENMP_LDLIBS :=
else ifeq ($(OS),Darwin)
OPENMP_CFLAGS := -Xpreprocessor -fopenmp -I$(LIBOMP)/include
OPENMP_LDLIBS := -L$(LIBOMP)/lib -lomp
else
OPENMP_CFLAGS := -fopenmp
OPENMP_LDLIBS := -fopenmp
endif
# tools/ladder.sh links, and tools/coursework.py compiles, with them too.
export OPENMP_CFLAGS OPENMP_LDLIBS

# -ffp-contract=off: a * b + c stays a multiply and an add (gcc's default
# with -std=c11; clang would fuse it), so every compiler gives the bits the
# SIMD kernels are written to match.
CFLAGS  += -std=c11 -D_GNU_SOURCE $(OPT) -g -Wall -Wextra -ffp-contract=off $(OPENMP_CFLAGS) -Icommon -Ichapters
LDLIBS  += -lz -lm $(OPENMP_LDLIBS)
ifneq ($(HOMEBREW),)
CFLAGS  += -I$(HOMEBREW)/include
LDLIBS  += -L$(HOMEBREW)/lib
endif
ifneq ($(strip $(CI)$(STRICT)),)
CFLAGS  += -Werror
endif
ifeq ($(SAN),1)
BUILD   := build-san
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDLIBS  += -fsanitize=address,undefined
endif
# The fuzz targets (tests/fuzz/fuzz_*.c) and the library under them: clang's
# libFuzzer with AddressSanitizer and UBSan (tools/deps.sh fuzz).
ifeq ($(FUZZ),1)
BUILD   := build-fuzz
CC      := clang-14
CFLAGS  += -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
# AddressSanitizer's checks on every load and store keep clang from
# vectorising the `#pragma omp simd` loops (residual, bias), which it reports
# as -Wpass-failed; a missed speed-up in a checking build, not a defect.
CFLAGS  += -Wno-pass-failed
LDLIBS  += -fsanitize=address,undefined
endif

# A chapter is a directory chapters/NN_name/ with a main.c (its program).
CHAPTERS     := $(sort $(patsubst chapters/%/main.c,%,$(wildcard chapters/[0-9][0-9]_*/main.c)))
chapter_num   = $(firstword $(subst _, ,$(1)))
CHAPTER_NUMS := $(foreach c,$(CHAPTERS),$(call chapter_num,$(c)))
# A chapter may have more programs: chapters/NN_name/main_X.c is build/NN_X
# (chapters/06_transformer/main_gpt.c is build/06_gpt), run after the
# chapter's own program by make run and make run-NN.
EXTRA_MAINS  := $(wildcard chapters/[0-9][0-9]_*/main_*.c)
extra_programs = $(patsubst chapters/$(1)/main_%.c,$(call chapter_num,$(1))_%,$(wildcard chapters/$(1)/main_*.c))
PROGRAMS     := $(foreach c,$(CHAPTERS),$(c) $(call extra_programs,$(c)))

# The ladder. common/ is one library, BUILD/libcommon.a, and each chapter's
# reusable code (chapters/NN_name/*.c but its main*.c) is another,
# BUILD/libNN.a. A program links only the libraries of its ladder, latest
# chapter first (a static library's calls are resolved only by the libraries
# after it on the command line):
#   LADDER_03 = BUILD/lib03.a BUILD/lib02.a BUILD/lib01.a BUILD/libcommon.a
# so a call from chapter N into a later chapter fails to link. Who links what:
#   chapter NN's programs (main*.c)      LADDER_NN
#   tests/test_X.c                       LADDER_NN, NN the highest chapter its
#                                        #include "NN_name/..." lines name
#                                        (none: LADDER_, common/ alone)
#   tests/coursework/grade_NN.c          LADDER_NN
#   fuzz targets, tools/*.c, bench/*.c   ALL_LIBS (every chapter)
# tools/ladder.sh checks each library against the ones before it (make test).
# On a CPU that is not x86 (AArch64) the x86 kernels (*_avx2.c, *_avx512.c,
# *_bf16.c) are left out and common/kernels/x86_stubs.c stands in for their
# entry points, as in mk/arm.mk; on x86 x86_stubs.c is empty, and so are the
# NEON files (*_neon.c) on any CPU but AArch64.
COMMON_SRC   := $(wildcard common/*/*.c)
ifeq ($(filter x86_64 amd64 i386 i686,$(ARCH)),)
COMMON_SRC   := $(filter-out %_avx2.c %_avx512.c %_bf16.c,$(COMMON_SRC))
endif
COMMON_OBJ   := $(patsubst %.c,$(BUILD)/obj/%.o,$(COMMON_SRC))
chapter_obj   = $(patsubst %.c,$(BUILD)/obj/%.o,$(filter-out %/main.c $(EXTRA_MAINS),$(wildcard chapters/$(1)_*/*.c)))
LADDER_      := $(BUILD)/libcommon.a
ladder       := $(LADDER_)
$(foreach n,$(CHAPTER_NUMS),$(eval ladder := $(BUILD)/lib$(n).a $(ladder))$(eval LADDER_$(n) := $(ladder)))
ALL_LIBS     := $(ladder)
test_chapter  = $(lastword $(sort $(shell sed -n 's/^\#include "\([0-9][0-9]\)_.*/\1/p' $(1))))

CHAPTER_BINS := $(PROGRAMS:%=$(BUILD)/%)
TEST_SRC     := $(wildcard tests/test_*.c)
TEST_BINS    := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# Helpers the test programs (and tools/) share: tests/*.c other than test_*.c
# (tests/golden.c: the golden tensor files).
TEST_SUPPORT_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(filter-out tests/test_%.c,$(wildcard tests/*.c)))
.SECONDARY: $(TEST_SUPPORT_OBJ)
TOOL_SRC     := $(wildcard tools/*.c)
TOOL_BINS    := $(TOOL_SRC:tools/%.c=$(BUILD)/tools/%)
# The coursework graders, one program per chapter (tests/coursework/grade_NN.c).
GRADE_SRC    := $(wildcard tests/coursework/grade_[0-9][0-9].c)
GRADE_BINS   := $(GRADE_SRC:tests/coursework/%.c=$(BUILD)/coursework/%)
GRADE_OBJ    := $(BUILD)/obj/tests/coursework/grade.o
FUZZ_SRC     := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS    := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_SECONDS ?= 60
BENCH_SRC    := $(wildcard bench/*.c)
BENCH_BINS   := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

.PHONY: doc-check figures figures-check all run compare length-ood teacher-runs gpt-variants gpt-moe gpt-mlp attention-cost attention-quality sparse-patterns vit-norms vit-linformer vit-data-size caption-encoders gpt-genre caption-compare test test-san test-backends test-valgrind fuzz deps-fuzz deps-valgrind bench twin golden readme clean deps-test deps-run deps-bench deps-twin \
        coursework coursework-check grade mutants submit grade-submissions test-submissions _build_graders \
        $(CHAPTERS:%=run-%) $(foreach c,$(CHAPTERS),run-$(firstword $(subst _, ,$(c))))

all: $(ALL_LIBS) $(CHAPTER_BINS)

# AVX2/FMA code is compiled with those instructions enabled, and called only
# after a run-time CPUID check (common/kernels/matmul.c), so the binaries still run on
# CPUs without AVX2 (or without AVX-512, for *_avx512.c).
$(BUILD)/obj/%_avx2.o: %_avx2.c $(wildcard common/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -mavx2 -mfma -c $< -o $@

# AVX-512 code likewise, with AVX2/FMA too (it shares AVX2 packing code).
$(BUILD)/obj/%_avx512.o: %_avx512.c $(wildcard common/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -mavx512f -mavx2 -mfma -c $< -o $@

# The bf16 products (VDPBF16PS) likewise: AVX512_BF16 (with the AVX512BW it
# builds on) on top of the AVX-512 flags, called only after its CPUID check.
$(BUILD)/obj/%_bf16.o: %_bf16.c $(wildcard common/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -mavx512f -mavx512bw -mavx512bf16 -mavx2 -mfma -c $< -o $@

$(BUILD)/obj/%.o: %.c $(wildcard common/*/*.h) $(wildcard chapters/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libcommon.a: $(COMMON_OBJ)
	@rm -f $@
	ar rcs $@ $^

define LIBRARY_RULE
$(BUILD)/lib$(1).a: $(call chapter_obj,$(1))
	@rm -f $$@
	ar rcs $$@ $$^
endef
$(foreach n,$(CHAPTER_NUMS),$(eval $(call LIBRARY_RULE,$(n))))

# Every program of chapter NN (main.c: BUILD/NN_name, main_X.c: BUILD/NN_X)
# links LADDER_NN; the tests and graders link the ladder of their chapter.
define PROGRAM_RULE
$(BUILD)/$(2): $(1) $(LADDER_$(3))
	$$(CC) $$(CFLAGS) $(1) $(LADDER_$(3)) $$(LDLIBS) -o $$@
endef
$(foreach c,$(CHAPTERS),$(eval $(call PROGRAM_RULE,chapters/$(c)/main.c,$(c),$(call chapter_num,$(c)))))
$(foreach c,$(CHAPTERS),$(foreach m,$(wildcard chapters/$(c)/main_*.c),\
  $(eval $(call PROGRAM_RULE,$(m),$(patsubst chapters/$(c)/main_%.c,$(call chapter_num,$(c))_%,$(m)),$(call chapter_num,$(c))))))
$(foreach t,$(TEST_SRC),$(eval $(t:tests/%.c=$(BUILD)/tests/%): LADDER = $(LADDER_$(call test_chapter,$(t)))))
$(foreach g,$(GRADE_SRC),$(eval $(g:tests/coursework/%.c=$(BUILD)/coursework/%): LADDER = $(LADDER_$(patsubst grade_%.c,%,$(notdir $(g))))))

$(BUILD)/tests/%: tests/%.c $(ALL_LIBS) $(TEST_SUPPORT_OBJ) $(wildcard tests/*.h) $(wildcard common/*/*.h chapters/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests $< $(TEST_SUPPORT_OBJ) $(LADDER) -lcmocka $(LDLIBS) -o $@

$(GRADE_OBJ): tests/coursework/grade.c tests/coursework/grade.h tests/golden.h $(wildcard common/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -c $< -o $@

$(BUILD)/coursework/grade_%: tests/coursework/grade_%.c $(GRADE_OBJ) $(ALL_LIBS) $(TEST_SUPPORT_OBJ) $(wildcard tests/coursework/*.h) $(wildcard common/*/*.h chapters/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Itests/coursework $< $(GRADE_OBJ) $(TEST_SUPPORT_OBJ) $(LADDER) $(LDLIBS) -o $@

# A fuzz target: the library built with -fsanitize=fuzzer-no-link, the
# target with libFuzzer's main (make fuzz builds these with FUZZ=1).
$(BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz_util.h $(ALL_LIBS) $(wildcard common/*/*.h chapters/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/fuzz -fsanitize=fuzzer $< $(ALL_LIBS) $(LDLIBS) -o $@

# C helpers of the Python tools (tools/twin_dump.c for make twin).
$(BUILD)/tools/%: tools/%.c $(ALL_LIBS) $(TEST_SUPPORT_OBJ) $(wildcard tests/*.h) $(wildcard common/*/*.h chapters/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests $< $(TEST_SUPPORT_OBJ) $(ALL_LIBS) $(LDLIBS) -o $@

$(BUILD)/bench/%: bench/%.c $(ALL_LIBS) $(wildcard bench/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(ALL_LIBS) $(BENCH_LIBS) $(LDLIBS) -o $@

deps-test:
	@bash tools/deps.sh test
	$(if $(findstring clang,$(CC)),@bash tools/deps.sh clang)
deps-run:
	@bash tools/deps.sh run
deps-bench:
	@bash tools/deps.sh bench
deps-twin:
	@bash tools/deps.sh twin
deps-fuzz:
	@bash tools/deps.sh fuzz
deps-valgrind:
	@bash tools/deps.sh valgrind

# Each chapter runs on its own quick default and writes under out/NN_name/.
run: deps-run all
	@BUILD=$(BUILD) OUT=out bash tools/make_run.sh $(PROGRAMS)

define RUN_RULE
run-$(firstword $(subst _, ,$(1))) run-$(1): deps-run $(BUILD)/$(1) $(patsubst %,$(BUILD)/%,$(call extra_programs,$(1)))
	@for p in $(1) $(call extra_programs,$(1)); do \
	  echo "=== $$$$p"; t0=$$$$(date +%s.%N); ./$(BUILD)/$$$$p --out out/$$$$p || exit 1; \
	  echo "=== $$$$p: $$$$(awk -v a=$$$$t0 -v b=$$$$(date +%s.%N) 'BEGIN { printf "%.1f", b - a }') s"; done
endef
$(foreach c,$(CHAPTERS),$(eval $(call RUN_RULE,$(c))))

# The lecture's block variants on chapter 06's GPT (tools/gpt_variants.sh; about 20 minutes).
gpt-variants: deps-run all
	@BUILD=$(BUILD) OUT=$(OUT) bash tools/gpt_variants.sh

# A mixture of experts against dense MLPs on chapter 06's GPT (tools/gpt_moe.sh; about 15 minutes).
gpt-moe: deps-run all
	@BUILD=$(BUILD) OUT=$(OUT) bash tools/gpt_moe.sh

# Why the MLP: chapter 06's GPT with and without it, three seeds each (tools/gpt_mlp.sh; about 7 minutes).
gpt-mlp: deps-run all
	@BUILD=$(BUILD) OUT=$(OUT) bash tools/gpt_mlp.sh

# The cost of attention as N grows: one layer, full, fused, window, BigBird and Linformer, and attention's share
# of a block (bench/bench_attention_cost.c; about 4 minutes on 2 cores).
attention-cost: deps-run $(BUILD)/bench/bench_attention_cost
	@mkdir -p $(OUT)/attention_cost && ./$(BUILD)/bench/bench_attention_cost --out $(OUT)/attention_cost && \
	  (cd $(OUT)/attention_cost && gnuplot attention_cost.gp)

# Full, window and BigBird attention in chapter 06's GPT on Brown and on the copy task, three seeds
# each (tools/attention_quality.sh; about 25 minutes).
attention-quality: deps-run all $(BUILD)/tools/copy_corpus
	@BUILD=$(BUILD) OUT=$(OUT) bash tools/attention_quality.sh

# Layer norm, RMSNorm and batch norm in chapter 07's ViT, three seeds each (tools/vit_norms.sh; about 12 minutes).
vit-norms: deps-run all
	@BUILD=$(BUILD) OUT=$(OUT) bash tools/vit_norms.sh

# Full attention against Linformer (k 8, 4) in chapter 07's ViT, three seeds each (tools/vit_linformer.sh; about 12 minutes).
vit-linformer: deps-run all
	@BUILD=$(BUILD) OUT=$(OUT) bash tools/vit_linformer.sh

# The ViT against the CNN and the MLP on 1,000 to 55,000 training images, three seeds each (tools/vit_data_size.sh;
# about 30 minutes).
vit-data-size: deps-run all
	@BUILD=$(BUILD) OUT=$(OUT) bash tools/vit_data_size.sh

# The captioner's encoders: the ViT, the CNN's grid from scratch, pretrained on single items and fine-tuned or
# frozen, three seeds each (tools/caption_encoders.sh; about 12 minutes).
caption-encoders: deps-run all
	@BUILD=$(BUILD) OUT=$(OUT) bash tools/caption_encoders.sh

# What pretraining buys: a passage's genre from 50, 200 and 1000 labels per genre, the GPT's shape from scratch,
# the pretrained GPT probed and fine-tuned, three seeds each (tools/gpt_genre.sh; about 20 minutes).
gpt-genre: deps-run all
	@BUILD=$(BUILD) OUT=$(OUT) bash tools/gpt_genre.sh

# The sparse patterns as the lecture draws them (tools/sparse_patterns.c).
sparse-patterns: deps-run $(BUILD)/tools/sparse_patterns
	@./$(BUILD)/tools/sparse_patterns --out $(OUT)/sparse_patterns

# Length generalisation: four models trained on 5-40, tested on 41-80 (tools/length_ood.sh).
length-ood: deps-run all
	@BUILD=$(BUILD) OUT=$(OUT) bash tools/length_ood.sh

# Chapter 07's captioners, pool / attend / transformer, one after another (tools/compare_caption.sh).
caption-compare: deps-run all
	@BUILD=$(BUILD) OUT=$(OUT) bash tools/compare_caption.sh

# One program at a time, one thread each (tools/compare_seq2seq.sh); then the two tables.
compare: deps-run all
	@BUILD=$(BUILD) OUT=$(OUT) bash tools/compare_seq2seq.sh

# The runs the coursework questions name, under out/teacher/, for TEACHER.md's model answers
# (tools/teacher_runs.sh; about 45 minutes; then make readme).
teacher-runs: deps-run all
	@BUILD=$(BUILD) OUT=$(OUT) bash tools/teacher_runs.sh

test: deps-test
	@$(MAKE) --no-print-directory _build_tests
	@bash tests/run_all.sh $(BUILD)

test-san:
	@$(MAKE) --no-print-directory SAN=1 test

# The kernel, layer and model suites once per backend, forced with ATTN_BACKEND
# (the ones this CPU cannot run are skipped with a note): every kernel, layer
# and model must pass on the specification (naive) as well as on the fast
# kernels. The suites of flags, files, data readers and whole-program runs do
# not depend on the backend: make test runs them once.
BACKEND_SUITES := test_matmul test_sgemm_simd test_sgemm_bf16 test_sgemm_neon test_vecmath test_vecmath_neon \
  test_threads test_layers test_layernorm test_batchnorm test_conv2d test_optim test_cells test_rope test_attention test_self_attention \
  test_multi_head test_locality test_flash_attention test_sparse_attention test_linformer test_block test_moe test_transformer test_patch_embed test_vit \
  test_pixel_mlp test_golden test_rnn_seq2seq test_bahdanau test_attn_seq2seq test_gpt test_genre test_caption \
  test_classifier test_robust_determinism
test-backends: deps-test
	@$(MAKE) --no-print-directory _build_tests
	@set -e; for b in naive avx2 avx512 neon; do \
	  if [ $$b = avx2 ] && ! grep -qw avx2 /proc/cpuinfo; then echo "=== $$b: not on this CPU, skipped"; continue; fi; \
	  if [ $$b = avx512 ] && ! grep -qw avx512f /proc/cpuinfo; then echo "=== $$b: not on this CPU, skipped"; continue; fi; \
	  if [ $$b = neon ] && [ "$$(uname -m)" != aarch64 ]; then echo "=== $$b: not on this CPU, skipped"; continue; fi; \
	  echo "=== ATTN_BACKEND=$$b"; log=$$(mktemp); \
	  if ATTN_BACKEND=$$b SUITES="$(BACKEND_SUITES)" bash tests/run_all.sh $(BUILD) >$$log 2>&1; then tail -n 1 $$log; rm -f $$log; \
	  else cat $$log; rm -f $$log; exit 1; fi; done

# The suites under valgrind memcheck (tests/run_all.sh runs each through
# $$RUNNER): any memory error or definitely lost block fails the suite. One
# thread and the naive backend keep valgrind on code it emulates exactly.
test-valgrind: deps-test deps-valgrind
	@$(MAKE) --no-print-directory _build_tests
	@OMP_NUM_THREADS=1 ATTN_BACKEND=naive \
	  RUNNER="valgrind --quiet --error-exitcode=99 --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite" \
	  bash tests/run_all.sh $(BUILD)

# Replay each fuzz target's corpus (tests/fuzz/NAME/), then fuzz it
# FUZZ_SECONDS; one line per target with executions and findings
# (tests/fuzz/run.sh). Fails when a target finds anything.
fuzz: deps-fuzz
	@$(MAKE) --no-print-directory FUZZ=1 _build_fuzz
	@bash tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS)

_build_fuzz: $(FUZZ_BINS)

_build_tests: $(ALL_LIBS) $(CHAPTER_BINS) $(TEST_BINS) $(GRADE_BINS) $(BUILD)/tools/model_size

bench: deps-bench
	@$(MAKE) --no-print-directory BENCH_LIBS="-lopenblas" $(BENCH_BINS) $(CHAPTER_BINS)
	@bash bench/run.sh $(BUILD)

twin: deps-twin all $(TOOL_BINS)
	@/usr/bin/python3 tools/twin.py --build $(BUILD)

# Coursework (README.md, "Coursework"): make coursework writes a student tree
# per chapter (CHAPTER=NN: that one) under COURSEWORK_OUT, each exercise of the
# code replaced by a TODO stub (tools/coursework.py). make grade runs the
# graders and prints the score table (tools/coursework_grade.py); in a student
# tree it grades the student's code, here the solution (full marks).
COURSEWORK_OUT ?= out/coursework
coursework:
	@/usr/bin/python3 tools/coursework.py --out $(COURSEWORK_OUT) $(if $(CHAPTER),--chapter $(CHAPTER))

# make coursework-check: every chapter's tree built once, then each exercise's
# solution put back alone and all together, each graded (tools/coursework_check.py).
coursework-check:
	@/usr/bin/python3 tools/coursework_check.py $(if $(CHAPTER),--chapter $(CHAPTER))

grade: $(ALL_LIBS) $(GRADE_BINS)
	@/usr/bin/python3 tools/coursework_grade.py --build $(BUILD)

_build_graders: $(ALL_LIBS) $(GRADE_BINS)

# The student's side: make submit (in a student tree) builds the tree and
# writes submission-NN-<id>.tar.gz, the student's files and a manifest
# (tools/coursework_submit.py). The teacher's: make grade-submissions DIR=dir
# grades each submission in dir with this repository's graders and hidden
# checks (SEED=n: their seed, default a fresh one) into GRADEBOOK_OUT
# (gradebook.csv, feedback/; tools/coursework_submissions.py).
# Each hand-in builds and runs in a bwrap sandbox (tools/deps.sh grade);
# without one it refuses unless UNSANDBOXED=1. ROSTER=file: the class's ids.
# make test-submissions grades a batch of made-up and hostile hand-ins
# (tests/coursework/test_submissions.sh; a few minutes).
submit:
	@/usr/bin/python3 tools/coursework_submit.py --build $(BUILD) $(if $(STUDENT),--student $(STUDENT))

GRADEBOOK_OUT ?= out/gradebook
grade-submissions:
	@test -n "$(DIR)" || { echo "make grade-submissions DIR=folder-of-submissions [SEED=n] [ROSTER=students.csv] [UNSANDBOXED=1]"; exit 2; }
	@$(if $(filter 1,$(UNSANDBOXED)),true,bash tools/deps.sh grade || true)
	@/usr/bin/python3 tools/coursework_submissions.py "$(DIR)" --out $(GRADEBOOK_OUT) $(if $(SEED),--seed $(SEED)) \
	  $(if $(TIME_LIMIT),--time-limit $(TIME_LIMIT)) $(if $(ROSTER),--roster "$(ROSTER)") $(if $(WORK),--work "$(WORK)") \
	  $(if $(filter 1,$(UNSANDBOXED)),--unsandboxed)

test-submissions:
	@bash tools/deps.sh grade
	@bash tests/coursework/test_submissions.sh

# Mutation testing of the graders: each plausible wrong solution under
# tests/coursework/mutants/ must lose its exercise's points (tools/mutants.sh).
mutants:
	@bash tools/mutants.sh

# Regenerate tests/golden/*.bin from PyTorch (they are committed: make test
# does not need torch).
golden: deps-twin
	@/usr/bin/python3 tools/golden.py

# The tables between <!-- results:NAME --> and <!-- /results --> in README.md and
# chapters/*/README.md, from the results.json files of the last make run (OUT=dir to
# read another tree). Fails, changing nothing, when one it needs is missing.
OUT ?= out
readme:
	@/usr/bin/python3 tools/readme_tables.py --out $(OUT)

# The figure manifest, chapters/FIGURES.tsv (tools/figures.py): make figures
# redraws every picture a text shows (CHAPTER=NN: that chapter's; MAX_MINUTES=m:
# leave out the commands that take longer, and say which), copies it into img/
# and stamps the commit it was drawn at (the code behind it must be committed).
# make figures-check compares the make-run pictures with the last make run's, byte
# for byte; make test checks that no picture is older than its code.
figures: all
	@/usr/bin/python3 tools/figures.py draw --build $(BUILD) $(if $(CHAPTER),--chapter $(CHAPTER)) \
	  $(if $(MAX_MINUTES),--max-minutes $(MAX_MINUTES))

figures-check:
	@/usr/bin/python3 tools/figures.py check-run --out $(OUT)

# Every ./build/... and make line of the READMEs' code blocks (tools/doc_check.py):
# --help, --compose and --load commands run against make run's checkpoints, a
# training command's flags checked (with --help appended), make targets listed.
doc-check: all $(TOOL_BINS)
	@/usr/bin/python3 tools/doc_check.py --build $(BUILD) --list

include mk/arm.mk

clean:
	rm -rf build build-san build-fuzz build-clang build-noomp build-clang-noomp
