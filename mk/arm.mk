# mk/arm.mk - make test-arm: the library, the kernel and layer suites and
# chapter 04 cross-compiled for AArch64 (ARM: Apple's M-series, ARM Linux)
# and run under emulation, so that the NEON backend (common/*/*_neon.c) is
# tested on a machine that is x86. Included by the Makefile.
#
#   make test-arm   install the cross tools (tools/deps.sh arm), build
#                   ARM_BUILD (build-arm/) with aarch64-linux-gnu-gcc, and run
#                   each suite under qemu-aarch64 on ARM_THREADS (2) threads;
#                   prints each suite's counts and the total. Then a short
#                   training run of chapter 04 (ARM_CH04_FLAGS) on the neon
#                   backend under qemu, and the same command on this x86
#                   machine's default backend (BUILD/04_self_attention):
#                   the two checkpoints must be the same bytes
#
# The AArch64 build leaves out the x86 files (*_avx2.c, *_avx512.c,
# *_bf16.c: their instructions exist only on x86); x86_stubs.c stands in for
# their entry points, which the run-time checks never call there. qemu-user
# runs the arm64 programs instruction by instruction in software: right
# answers, not ARM's speed (nothing here is timed).

ARM_BUILD   ?= build-arm
ARM_CC      ?= aarch64-linux-gnu-gcc
ARM_SYSROOT ?= /usr/aarch64-linux-gnu
# -E LD_LIBRARY_PATH: the C library of the cross compiler's sysroot, whose
# ld.so qemu loads, before the arm64 libc6 that multiarch installs beside
# libcmocka and zlib (the host's ld.so.cache lists it): a newer libc.so.6
# with the sysroot's older ld.so hangs in the first pthread_create.
ARM_RUN     ?= qemu-aarch64 -L $(ARM_SYSROOT) -E LD_LIBRARY_PATH=$(ARM_SYSROOT)/lib
ARM_THREADS ?= 2
ARM_CFLAGS  := -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -ffp-contract=off -fopenmp -Icommon -Ichapters
ARM_LDLIBS  := -lz -lm -fopenmp

# The suites that run: every kernel (matmul, the element-wise functions,
# LayerNorm, Adam, the SIMD sgemm paths) and the layers' gradient checks.
ARM_SUITES  := test_matmul test_sgemm_neon test_sgemm_simd test_vecmath test_vecmath_neon \
               test_layernorm test_optim test_layers test_cells

ARM_COMMON_SRC := $(filter-out %_avx2.c %_avx512.c %_bf16.c,$(wildcard common/*/*.c))
ARM_COMMON_OBJ := $(ARM_COMMON_SRC:%.c=$(ARM_BUILD)/obj/%.o)

# Chapters 01-04 as the Makefile's ladder: libNN.a of each chapter's code
# (chapters/NN_name/*.c but its main*.c), and chapter 04's program linked
# against LADDER_04's libraries, latest chapter first.
ARM_CHAPTERS  := 01 02 03 04
arm_chapter_obj = $(patsubst %.c,$(ARM_BUILD)/obj/%.o,$(filter-out $(wildcard chapters/$(1)_*/main*.c),$(wildcard chapters/$(1)_*/*.c)))
ARM_LADDER_04 := $(foreach n,04 03 02 01,$(ARM_BUILD)/lib$(n).a) $(ARM_BUILD)/libcommon.a
# The training run compared: one task and encoding, a small model, 30 steps,
# 2 threads (the bits do not depend on the count).
ARM_CH04_FLAGS ?= --task reverse --pos sinusoidal --steps 30 --dim 16 --ff 32 --layers 1 --batch 16 \
                  --test-size 50 --seed 7 --threads 2 --quiet
ARM_CH04_CKPT  := model_reverse_sinusoidal.ckpt

# The tests' helpers (tests/*.c but test_*.c), as a library: a suite links
# only the ones it calls.
ARM_SUPPORT_OBJ := $(patsubst %.c,$(ARM_BUILD)/obj/%.o,$(filter-out tests/test_%.c,$(wildcard tests/*.c)))
ARM_SUITE_BINS  := $(ARM_SUITES:%=$(ARM_BUILD)/tests/%)

$(ARM_BUILD)/obj/%.o: %.c $(wildcard common/*/*.h) $(wildcard chapters/*/*.h) $(wildcard tests/*.h)
	@mkdir -p $(dir $@)
	$(ARM_CC) $(ARM_CFLAGS) -Itests -c $< -o $@

$(ARM_BUILD)/libcommon.a: $(ARM_COMMON_OBJ)
	@rm -f $@
	aarch64-linux-gnu-ar rcs $@ $^

define ARM_LIBRARY_RULE
$(ARM_BUILD)/lib$(1).a: $(call arm_chapter_obj,$(1))
	@rm -f $$@
	aarch64-linux-gnu-ar rcs $$@ $$^
endef
$(foreach n,$(ARM_CHAPTERS),$(eval $(call ARM_LIBRARY_RULE,$(n))))

$(ARM_BUILD)/04_self_attention: chapters/04_self_attention/main.c $(ARM_LADDER_04)
	$(ARM_CC) $(ARM_CFLAGS) $< $(ARM_LADDER_04) $(ARM_LDLIBS) -o $@

$(ARM_BUILD)/libtestsupport.a: $(ARM_SUPPORT_OBJ)
	@rm -f $@
	aarch64-linux-gnu-ar rcs $@ $^

$(ARM_BUILD)/tests/%: tests/%.c $(ARM_BUILD)/libtestsupport.a $(ARM_BUILD)/libcommon.a $(wildcard tests/*.h common/*/*.h)
	@mkdir -p $(dir $@)
	$(ARM_CC) $(ARM_CFLAGS) -Itests $< $(ARM_BUILD)/libtestsupport.a $(ARM_BUILD)/libcommon.a -lcmocka $(ARM_LDLIBS) -o $@

.PHONY: test-arm _build_arm _arm_ch04
_build_arm: $(ARM_BUILD)/libcommon.a $(ARM_SUITE_BINS) $(ARM_BUILD)/04_self_attention

# Each suite under qemu, its cmocka summary kept; then the totals. Fails when
# a suite fails or crashes.
test-arm:
	@bash tools/deps.sh arm
	@$(MAKE) --no-print-directory _build_arm
	@set -u; passed=0; failed=0; skipped=0; bad=""; start=$$(date +%s); \
	for s in $(ARM_SUITES); do \
	  log=$$(mktemp); \
	  OMP_NUM_THREADS=$(ARM_THREADS) $(ARM_RUN) $(ARM_BUILD)/tests/$$s >$$log 2>&1; rc=$$?; \
	  p=$$(grep -Eo '\[  PASSED  \] [0-9]+' $$log | grep -Eo '[0-9]+$$' | tail -n 1); \
	  f=$$(grep -Eo '\[  FAILED  \] [0-9]+' $$log | grep -Eo '[0-9]+$$' | tail -n 1); \
	  k=$$(grep -Eo '\[  SKIPPED \] [0-9]+' $$log | grep -Eo '[0-9]+$$' | tail -n 1); \
	  passed=$$((passed + $${p:-0})); failed=$$((failed + $${f:-0})); skipped=$$((skipped + $${k:-0})); \
	  if [ $$rc -ne 0 ]; then cat $$log; bad="$$bad $$s"; [ -z "$$f" ] && failed=$$((failed + 1)); fi; \
	  echo "arm64 $$s: $${p:-0} passed, $${f:-0} failed, $${k:-0} skipped"; rm -f $$log; \
	done; \
	echo "test-arm (qemu-aarch64, $(ARM_THREADS) threads): $$passed passed, $$failed failed, $$skipped skipped, $$(( $$(date +%s) - start )) s"; \
	if [ -n "$$bad" ]; then echo "failing suites:$$bad"; exit 1; fi
	@$(MAKE) --no-print-directory _arm_ch04

# Chapter 04's checkpoint, arm64 (neon, under qemu) against x86 (the default
# backend: avx512 or avx2; the SIMD kernels give the same bits, the naive
# loops do not, so a CPU without AVX2 skips the comparison).
_arm_ch04: $(ARM_BUILD)/04_self_attention $(BUILD)/04_self_attention
	@set -u; arm=$(ARM_BUILD)/ch04/arm64; x86=$(ARM_BUILD)/ch04/x86; rm -rf $$arm $$x86; mkdir -p $(ARM_BUILD)/ch04; \
	$(ARM_RUN) $(ARM_BUILD)/04_self_attention $(ARM_CH04_FLAGS) --backend neon --out $$arm >$$arm.log 2>&1 \
	  || { cat $$arm.log; echo "chapter 04 under qemu-aarch64 failed"; exit 1; }; \
	./$(BUILD)/04_self_attention $(ARM_CH04_FLAGS) --out $$x86 >$$x86.log 2>&1 \
	  || { cat $$x86.log; echo "chapter 04 on x86 failed"; exit 1; }; \
	backend=$$(sed -n 's/.*"backend": *"\([a-z0-9]*\)".*/\1/p' $$x86/results.json | head -n 1); \
	if [ "$$backend" = naive ]; then echo "chapter 04: x86 runs the naive backend here (no AVX2): not compared"; exit 0; fi; \
	if cmp -s $$arm/$(ARM_CH04_CKPT) $$x86/$(ARM_CH04_CKPT); then \
	  echo "chapter 04 checkpoint ($(ARM_CH04_CKPT), $$(wc -c <$$x86/$(ARM_CH04_CKPT)) bytes): arm64 neon = x86 $$backend, byte for byte"; \
	else \
	  echo "chapter 04 checkpoint: arm64 neon differs from x86 $$backend ($$arm, $$x86):"; \
	  cmp $$arm/$(ARM_CH04_CKPT) $$x86/$(ARM_CH04_CKPT); exit 1; \
	fi
