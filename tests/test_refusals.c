/* test_refusals.c - flags, environment values and checkpoint configs
 * that used to do nothing without a word, or to load what no training wrote:
 *  - 06_gpt's expert flags (--experts, --moe-top-k, --moe-aux, --capacity)
 *    without --mlp moe; 05's --heads with a count twice;
 *    ATTN_GNUPLOT_TIMEOUT=0, -1, abc (they became 60 s); --steps 0, which
 *    chapter 04 refused and the other programs took (they trained no step);
 *  - 06_transformer --load CKPT --no-kv-cache --translate (a decoding option,
 *    refused with --load): now accepted, with the same output;
 *  - checkpoint configs: a dense GPT with moe_top_k=9, a duplicated
 *    vocab_crc= line, a learned-position transformer with src_pos_rows=0
 *    (and a sinusoidal one with a table's rows), a GPT with context=65536
 *    (beyond --context's range);
 *  - the GPT's printed aux loss: the last evaluation batch's, while
 *    results.json kept the last training batch's.
 * And memory, checked before it is asked for (train/memory.h): the GPT of
 * --dim 64 --layers 1 --batch 4096 --context 4096 (terabytes of activations;
 * it ended in "fatal: out of memory" and SIGABRT), and a checkpoint whose
 * model with --batch needs more than the process may have, each under
 * ulimit -v and under a --max-memory cap; the estimate's parameter count is
 * the model's own.
 * Each refusal is one line on stderr and exit 1 (program_run.h's rule). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <limits.h>
#include <unistd.h>
#include <zlib.h>

#include <setjmp.h>
#include <cmocka.h>

#include "06_transformer/gpt.h"
#include "io/checkpoint.h"
#include "program_run.h"
#include "temp_dir.h"
#include "util/util.h"

static char build_dir[1024];
static char tmp_dir[256];
static char repo_dir[1024];   /* the working directory at start: data/ is there */

static void assert_clean_failure(const RunResult *r, const char *what, const char *expect) {
    if (!program_failed_cleanly(r, expect))
        print_error("%s\n  exit %d (exited normally: %d)\n  stderr: %.2000s\n  expected exit 1 and one error line "
                    "mentioning '%s'\n", what, r->code, r->exited, r->err, expect);
    assert_true(program_failed_cleanly(r, expect));
}

static void assert_success(const RunResult *r, const char *what) {
    if (!r->exited || r->code != 0)
        print_error("%s\n  exit %d (exited normally: %d)\n  stderr: %.2000s\n", what, r->code, r->exited, r->err);
    assert_true(r->exited);
    assert_int_equal(r->code, 0);
}

/* A short training run of program into tmp_dir/dir; its checkpoint's path in ckpt. */
static void train(const char *program, const char *args, const char *dir, char *ckpt, size_t cap) {
    RunResult *r = malloc(sizeof *r);
    program_shell(r, tmp_dir, "cd %s && %s/%s %s --quiet --out %s/%s", repo_dir, build_dir, program, args, tmp_dir, dir);
    assert_success(r, program);
    free(r);
    snprintf(ckpt, cap, "%s/%s/model.ckpt", tmp_dir, dir);
    struct stat st;
    assert_int_equal(stat(ckpt, &st), 0);
}

/* A copy of checkpoint from at to whose config has was replaced by now, the
 * config length and the CRC-32 made right (as test_hostile.c's). */
static void rewrite_config(const char *from, const char *to, const char *was, const char *now) {
    size_t len;
    unsigned char *b = (unsigned char *)read_whole_file(from, &len);
    assert_non_null(b);
    assert_true(len > 20 && memcmp(b, CKPT_MAGIC, 8) == 0);
    const uint32_t config_len = (uint32_t)b[12] | (uint32_t)b[13] << 8 | (uint32_t)b[14] << 16 | (uint32_t)b[15] << 24;
    unsigned char *at = memmem(b + 16, config_len, was, strlen(was));
    assert_non_null(at);
    const size_t new_len = len - strlen(was) + strlen(now);
    unsigned char *out = malloc(new_len);
    assert_non_null(out);
    size_t before = (size_t)(at - b), after = len - before - strlen(was);
    memcpy(out, b, before);
    memcpy(out + before, now, strlen(now));
    memcpy(out + before + strlen(now), at + strlen(was), after);
    const uint32_t new_config_len = config_len - (uint32_t)strlen(was) + (uint32_t)strlen(now);
    for (int i = 0; i < 4; i++) out[12 + i] = (unsigned char)(new_config_len >> (8 * i));
    const uLong crc = crc32(0L, out, (uInt)(new_len - 4));
    for (int i = 0; i < 4; i++) out[new_len - 4 + i] = (unsigned char)(crc >> (8 * i));
    FILE *f = fopen(to, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(out, 1, new_len, f), new_len);
    assert_int_equal(fclose(f), 0);
    free(out);
    free(b);
}

/* The whole "key=value" line of a checkpoint's config (without '\n') into line. */
static void config_line(const char *ckpt, const char *key, char *line, size_t cap) {
    char *config = NULL;
    assert_int_equal(checkpoint_read_config(ckpt, &config), 0);
    char value[64];
    assert_int_equal(config_get(config, key, value, sizeof value), 0);
    snprintf(line, cap, "%s=%s\n", key, value);
    free(config);
}

#define GPT_TINY "--layers 1 --dim 8 --heads 2 --ff 8 --context 16 --batch 2 --eval-every 0 --eval-max-tokens 300 " \
                 "--max-new 5"

static void test_flags_without_effect(void **state) {
    (void)state;
    RunResult *r = malloc(sizeof *r);
    const char *moe[][2] = {{"--experts 3", "--experts"}, {"--moe-top-k 2", "--moe-top-k"},
                            {"--capacity 1.5", "--capacity"}, {"--moe-aux 0.5", "--moe-aux"}};
    for (int i = 0; i < 4; i++) {
        program_shell(r, tmp_dir, "cd %s && timeout 60 %s/06_gpt --steps 1 %s --out %s/gpt_moe_flag", repo_dir, build_dir, moe[i][0],
              tmp_dir);
        assert_clean_failure(r, moe[i][0], "add --mlp moe");
    }
    program_shell(r, tmp_dir, "cd %s && timeout 60 %s/06_gpt --steps 1 --mlp moe --experts 2 --moe-top-k 3 --out %s/gpt_k", repo_dir,
          build_dir, tmp_dir);
    assert_clean_failure(r, "--moe-top-k 3 --experts 2", "at most --experts");
    program_shell(r, tmp_dir, "timeout 60 %s/05_multi_head_attention --heads 2,2 --steps 1 --out %s/h22", build_dir, tmp_dir);
    assert_clean_failure(r, "05 --heads 2,2", "2 comes twice");
    program_shell(r, tmp_dir, "timeout 60 %s/05_multi_head_attention --heads 1,2,4,2 --steps 1 --out %s/h22", build_dir, tmp_dir);
    assert_clean_failure(r, "05 --heads 1,2,4,2", "2 comes twice");
    /* --steps 0 (a run that trains nothing) was refused by chapter 04 alone: one range for every program now */
    const char *steps0[] = {"01_rnn_seq2seq", "04_self_attention", "06_gpt", "07_caption"};
    for (int i = 0; i < 4; i++) {
        program_shell(r, tmp_dir, "cd %s && timeout 60 %s/%s --steps 0 --out %s/steps0", repo_dir, build_dir, steps0[i],
                      tmp_dir);
        assert_clean_failure(r, steps0[i], "--steps: expected an integer in [1, 10000000], got '0'");
    }
    const char *timeouts[] = {"0", "-1", "abc", "1e9"};
    for (int i = 0; i < 4; i++) {
        program_shell(r, tmp_dir, "ATTN_GNUPLOT_TIMEOUT='%s' timeout 60 %s/01_rnn_seq2seq --steps 1 --out %s/timeout01", timeouts[i],
              build_dir, tmp_dir);
        assert_clean_failure(r, timeouts[i], "ATTN_GNUPLOT_TIMEOUT=");
        program_shell(r, tmp_dir, "cd %s && ATTN_GNUPLOT_TIMEOUT='%s' timeout 60 %s/06_gpt --steps 1 --out %s/timeout_gpt", repo_dir,
              timeouts[i], build_dir, tmp_dir);
        assert_clean_failure(r, timeouts[i], "ATTN_GNUPLOT_TIMEOUT=");
        program_shell(r, tmp_dir, "ATTN_GNUPLOT_TIMEOUT='%s' timeout 60 %s/04_self_attention --steps 1 --out %s/timeout04",
              timeouts[i], build_dir, tmp_dir);
        assert_clean_failure(r, timeouts[i], "ATTN_GNUPLOT_TIMEOUT=");
    }
    free(r);
}

/* 06_transformer --load --no-kv-cache --translate: decodes, the same output
 * as with the cache. Then its config: the learned tables' rows. */
static void test_transformer_load(void **state) {
    (void)state;
    char ckpt[700], sin_ckpt[700], bad[700];
    train("06_transformer", "--steps 2 --layers 1 --dim 8 --heads 2 --ff 8 --n-train 200 --max-eval 10 "
          "--samples 0 --pos learned", "t06", ckpt, sizeof ckpt);
    RunResult *r = malloc(sizeof *r), *with_cache = malloc(sizeof *with_cache);
    program_shell(with_cache, tmp_dir, "timeout 60 %s/06_transformer --load %s --translate '21 Nov 2026' --out %s/t06_eval", build_dir,
          ckpt, tmp_dir);
    assert_success(with_cache, "06_transformer --load --translate");
    program_shell(r, tmp_dir, "timeout 60 %s/06_transformer --load %s --no-kv-cache --translate '21 Nov 2026' --out %s/t06_eval",
          build_dir, ckpt, tmp_dir);
    assert_success(r, "06_transformer --load --no-kv-cache --translate");
    assert_non_null(strstr(r->out, "21 Nov 2026 -> "));
    assert_string_equal(strstr(r->out, "21 Nov 2026 -> "), strstr(with_cache->out, "21 Nov 2026 -> "));

    char line[128];
    config_line(ckpt, "src_pos_rows", line, sizeof line);
    snprintf(bad, sizeof bad, "%s/rows0.ckpt", tmp_dir);
    rewrite_config(ckpt, bad, line, "src_pos_rows=0\n");
    program_shell(r, tmp_dir, "timeout 60 %s/06_transformer --load %s --out %s/t06_bad", build_dir, bad, tmp_dir);
    assert_clean_failure(r, "src_pos_rows=0 with pos=learned", "src_pos_rows=0 with pos=learned");

    train("06_transformer", "--steps 2 --layers 1 --dim 8 --heads 2 --ff 8 --n-train 200 --max-eval 10 "
          "--samples 0", "t06s", sin_ckpt, sizeof sin_ckpt);
    rewrite_config(sin_ckpt, bad, "tgt_pos_rows=0\n", "tgt_pos_rows=12\n");
    program_shell(r, tmp_dir, "timeout 60 %s/06_transformer --load %s --out %s/t06_bad", build_dir, bad, tmp_dir);
    assert_clean_failure(r, "tgt_pos_rows=12 with sinusoidal positions", "only learned positions have a table");
    free(r);
    free(with_cache);
}

/* A GPT checkpoint's config: a dense model with moe_top_k=9, a second
 * vocab_crc= line, a context beyond --context's range. */
static void test_gpt_config_at_load(void **state) {
    (void)state;
    char ckpt[700], bad[700];
    train("06_gpt", "--steps 2 " GPT_TINY, "g06", ckpt, sizeof ckpt);
    RunResult *r = malloc(sizeof *r);
    snprintf(bad, sizeof bad, "%s/k9.ckpt", tmp_dir);
    rewrite_config(ckpt, bad, "moe_top_k=1\n", "moe_top_k=9\n");
    program_shell(r, tmp_dir, "cd %s && timeout 60 %s/06_gpt --load %s --out %s/g06_bad", repo_dir, build_dir, bad, tmp_dir);
    assert_clean_failure(r, "experts=0 moe_top_k=9", "experts 0 (a dense MLP) with top-k 9");
    rewrite_config(ckpt, bad, "tokens=char\n", "tokens=char\nvocab_crc=00000000\n");
    program_shell(r, tmp_dir, "cd %s && timeout 60 %s/06_gpt --load %s --out %s/g06_bad", repo_dir, build_dir, bad, tmp_dir);
    assert_clean_failure(r, "two vocab_crc lines", "two 'vocab_crc=' lines");
    rewrite_config(ckpt, bad, "context=16\n", "context=65536\n");
    program_shell(r, tmp_dir, "cd %s && timeout 60 %s/06_gpt --load %s --out %s/g06_bad", repo_dir, build_dir, bad, tmp_dir);
    assert_clean_failure(r, "context=65536", "'context': expected an integer in 2..4096");
    free(r);
}

/* --mlp moe: the aux loss printed is the one results.json records (the last
 * training batch's); it printed the last evaluation batch's. */
static void test_moe_aux_printed_as_recorded(void **state) {
    (void)state;
    RunResult *r = malloc(sizeof *r);
    program_shell(r, tmp_dir, "cd %s && timeout 120 %s/06_gpt --steps 3 --mlp moe --experts 3 --moe-top-k 2 " GPT_TINY
          " --out %s/moe_aux", repo_dir, build_dir, tmp_dir);
    assert_success(r, "06_gpt --mlp moe");
    const char *at = strstr(r->out, "aux loss ");
    assert_non_null(at);
    const double printed = strtod(at + strlen("aux loss "), NULL);
    assert_non_null(strstr(at, "per block on the last training batch"));
    char path[600], line[64];
    snprintf(path, sizeof path, "%s/moe_aux/results.json", tmp_dir);
    size_t len;
    char *json = read_whole_file(path, &len);
    assert_non_null(json);
    const char *key = strstr(json, "\"moe_aux_per_block\": ");
    assert_non_null(key);
    snprintf(line, sizeof line, "%.3f", strtod(key + strlen("\"moe_aux_per_block\": "), NULL));
    assert_true(strtod(line, NULL) == printed);
    free(json);
    free(r);
}

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* The two cases end in one line and exit 1: under ulimit -v (not in
 * a sanitizer build, whose shadow memory needs the address space) and, on
 * any machine, under --max-memory. */
static void test_memory_checked_first(void **state) {
    (void)state;
    RunResult *r = malloc(sizeof *r);
    const char *big = "--dim 64 --layers 1 --heads 4 --batch 4096 --context 4096 --steps 1 --eval-every 0";
    if (!UNDER_ASAN) {
        program_shell(r, tmp_dir, "cd %s && ulimit -v 4194304 && timeout 120 %s/06_gpt %s --out %s/big", repo_dir, build_dir, big,
              tmp_dir);
        assert_clean_failure(r, "06_gpt --batch 4096 --context 4096 under ulimit -v 4 GiB", "the address-space limit");
        assert_non_null(strstr(r->err, "the largest part: the attention maps"));
    }
    program_shell(r, tmp_dir, "cd %s && timeout 120 %s/06_gpt %s --max-memory 1024 --out %s/big", repo_dir, build_dir, big, tmp_dir);
    assert_clean_failure(r, "06_gpt --batch 4096 --context 4096 --max-memory 1024", "--max-memory");
    assert_non_null(strstr(r->err, "TB of memory"));
    /* the same flags at --batch 2 --context 16 fit in 1 GiB and train */
    program_shell(r, tmp_dir, "cd %s && timeout 120 %s/06_gpt --dim 64 --layers 1 --heads 4 --batch 2 --context 16 --steps 1 "
          "--eval-every 0 --eval-max-tokens 300 --max-new 5 --max-memory 1024 --quiet --out %s/small", repo_dir,
          build_dir, tmp_dir);
    assert_success(r, "06_gpt small under --max-memory 1024");

    /* a saved model: context=4096 in its config (the tensors are refused
     * later: the memory is checked before they are read) with --batch 512 */
    char ckpt[700], bad[700];
    train("06_gpt", "--steps 1 " GPT_TINY, "g06m", ckpt, sizeof ckpt);
    snprintf(bad, sizeof bad, "%s/ctx4096.ckpt", tmp_dir);
    rewrite_config(ckpt, bad, "context=16\n", "context=4096\n");
    if (!UNDER_ASAN) {
        program_shell(r, tmp_dir, "cd %s && ulimit -v 4194304 && timeout 120 %s/06_gpt --load %s --batch 512 --out %s/ctx", repo_dir,
              build_dir, bad, tmp_dir);
        assert_clean_failure(r, "06_gpt --load (context=4096) --batch 512 under ulimit -v", "ctx4096.ckpt: its model");
    }
    program_shell(r, tmp_dir, "cd %s && timeout 120 %s/06_gpt --load %s --batch 512 --max-memory 100 --out %s/ctx", repo_dir,
          build_dir, bad, tmp_dir);
    assert_clean_failure(r, "06_gpt --load (context=4096) --batch 512 --max-memory 100", "--max-memory");
    free(r);
}

/* The models no formula lists (the seq2seq programs', the classifiers'):
 * their allocations are counted while they are built, and the one that
 * would pass the limit ends the program in one line and exit 1 (it was
 * "fatal: out of memory allocating 7784628224 bytes" and SIGABRT). */
static void test_every_build_counted(void **state) {
    (void)state;
    if (UNDER_ASAN) skip();
    static const char *const runs[][2] = {
        {"01_rnn_seq2seq", "--state 4096 --batch 4096 --steps 1"},
        {"06_transformer", "--dim 1024 --ff 4096 --layers 8 --batch 4096 --steps 1"},
        {"04_self_attention", "--task sort --pos none --dim 1024 --ff 4096 --len 64 --batch 4096 --steps 1"},
    };
    RunResult *r = malloc(sizeof *r);
    for (int i = 0; i < 3; i++) {
        program_shell(r, tmp_dir, "cd %s && ulimit -v 4194304 && timeout 120 %s/%s %s --quiet --out %s/big%d",
                      repo_dir, build_dir, runs[i][0], runs[i][1], tmp_dir, i);
        assert_clean_failure(r, runs[i][0], "the model of these flags needs more than the");
        assert_non_null(strstr(r->err, "the address-space limit (ulimit -v)"));
    }
    free(r);
}

/* The estimate's parameters are the model's: 2 x 4 bytes a parameter for a
 * saved model (weights and gradients), 4 x 4 in training; its logits part is
 * 2 B N V floats. */
static void test_memory_estimate_matches_the_model(void **state) {
    (void)state;
    GptConfig cfg = {.layers = 2, .block = {.D = 16, .H = 2, .F = 24, .norm_place = BLOCK_PRE_NORM,
                                             .norm = BLOCK_LAYERNORM, .mlp = BLOCK_MLP_GELU},
                     .pos = POSITIONS_LEARNED, .context = 12, .V = 30, .kv_cache = 1};
    for (int moe = 0; moe < 2; moe++) {
        if (moe) cfg.block.moe = (BlockMoe){.E = 3, .k = 2, .renorm = 1};
        MemoryPart parts[GPT_MEMORY_PARTS], saved[GPT_MEMORY_PARTS];
        assert_int_equal(gpt_memory_parts(&cfg, 5, 1, parts), GPT_MEMORY_PARTS);
        assert_int_equal(gpt_memory_parts(&cfg, 5, 0, saved), GPT_MEMORY_PARTS);
        Gpt *g = calloc(1, sizeof *g);
        assert_int_equal(gpt_create(g, &cfg, 5, 1), 0);
        assert_true(parts[0].bytes == 16.0 * (double)g->params.size);
        assert_true(saved[0].bytes == 8.0 * (double)g->params.size);
        assert_true(parts[3].bytes == 8.0 * 5 * 12 * 30);
        gpt_free(g);
        free(g);
    }
    cfg.block.moe = (BlockMoe){.E = 0, .k = 9};
    MemoryPart parts[GPT_MEMORY_PARTS];
    assert_int_equal(gpt_memory_parts(&cfg, 5, 1, parts), -1);
}

static int setup(void **state) {
    (void)state;
    if (!getcwd(repo_dir, sizeof repo_dir)) return -1;
    return temp_dir_make(tmp_dir, sizeof tmp_dir, "test_refusals");
}

static int teardown(void **state) {
    (void)state;
    return temp_dir_remove(tmp_dir);
}

int main(int argc, char **argv) {
    (void)argc;
    program_build_dir(build_dir, sizeof build_dir, argv[0]);
    char absolute[PATH_MAX];   /* some runs change directory first */
    if (realpath(build_dir, absolute) && strlen(absolute) < sizeof build_dir) strcpy(build_dir, absolute);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flags_without_effect),
        cmocka_unit_test(test_transformer_load),
        cmocka_unit_test(test_gpt_config_at_load),
        cmocka_unit_test(test_moe_aux_printed_as_recorded),
        cmocka_unit_test(test_memory_checked_first),
        cmocka_unit_test(test_every_build_counted),
        cmocka_unit_test(test_memory_estimate_matches_the_model),
    };
    return cmocka_run_group_tests_name("refusals", tests, setup, teardown);
}
