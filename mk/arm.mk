# mk/arm.mk - make test-arm: the library and the kernel and layer suites
# cross-compiled for AArch64 (ARM: Apple's M-series, ARM Linux) and run under
# emulation, so that the NEON backend (common/kernels/*_neon.c) is tested on
# a machine that is x86. Included by the Makefile.
#
#   make test-arm   install the cross tools (tools/deps.sh arm), build
#                   ARM_BUILD (build-arm/) with aarch64-linux-gnu-gcc, and run
#                   each suite under qemu-aarch64 on ARM_THREADS (2) threads;
#                   prints each suite's counts and the total
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
ARM_CFLAGS  := -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -fopenmp -Icommon -Ichapters
ARM_LDLIBS  := -lz -lm -fopenmp

# The suites that run: every kernel (matmul, the element-wise functions,
# LayerNorm, Adam, the SIMD sgemm paths) and the layers' gradient checks.
ARM_SUITES  := test_matmul test_sgemm_neon test_sgemm_simd test_vecmath test_vecmath_neon \
               test_layernorm test_optim test_layers test_cells

ARM_COMMON_SRC := $(filter-out %_avx2.c %_avx512.c %_bf16.c,$(wildcard common/*/*.c))
ARM_COMMON_OBJ := $(ARM_COMMON_SRC:%.c=$(ARM_BUILD)/obj/%.o)
# The tests' helpers (tests/*.c but test_*.c), as a library: a suite links
# only the ones it calls.
ARM_SUPPORT_OBJ := $(patsubst %.c,$(ARM_BUILD)/obj/%.o,$(filter-out tests/test_%.c,$(wildcard tests/*.c)))
ARM_SUITE_BINS  := $(ARM_SUITES:%=$(ARM_BUILD)/tests/%)

$(ARM_BUILD)/obj/%.o: %.c $(wildcard common/*/*.h) $(wildcard tests/*.h)
	@mkdir -p $(dir $@)
	$(ARM_CC) $(ARM_CFLAGS) -Itests -c $< -o $@

$(ARM_BUILD)/libcommon.a: $(ARM_COMMON_OBJ)
	@rm -f $@
	aarch64-linux-gnu-ar rcs $@ $^

$(ARM_BUILD)/libtestsupport.a: $(ARM_SUPPORT_OBJ)
	@rm -f $@
	aarch64-linux-gnu-ar rcs $@ $^

$(ARM_BUILD)/tests/%: tests/%.c $(ARM_BUILD)/libtestsupport.a $(ARM_BUILD)/libcommon.a $(wildcard tests/*.h common/*/*.h)
	@mkdir -p $(dir $@)
	$(ARM_CC) $(ARM_CFLAGS) -Itests $< $(ARM_BUILD)/libtestsupport.a $(ARM_BUILD)/libcommon.a -lcmocka $(ARM_LDLIBS) -o $@

.PHONY: test-arm _build_arm
_build_arm: $(ARM_BUILD)/libcommon.a $(ARM_SUITE_BINS)

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
