/* test_checkpoint.c - the checkpoint file: a save/load round trip gives the
 * same bits, and every kind of bad file is refused with one clear message
 * (missing, not a checkpoint, wrong version, truncated anywhere, a flipped
 * byte, absurd lengths, a model of another shape) while the model's
 * parameters stay exactly as they were. Also: saving over an existing file
 * leaves no temporary files behind, and the config-text helpers. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/checkpoint.h"
#include "util/error.h"
#include "nn/params.h"
#include "util/util.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "temp_dir.h"

static char tmp_dir[256];
static const char *CONFIG = "task=dates\nhidden=64\ncell=gru\n";

/* ------------------------------------------------------------------ helpers */

/* A small model: three tensors of 1, 2 and 3 dims. variant changes one
 * thing about the layout so it no longer matches the saved file. */
enum { SAME, OTHER_DIMS, OTHER_NAME, EXTRA_TENSOR, FEWER_TENSORS };

static void build_model(Params *p, int variant) {
    params_init(p);
    params_add(p, "enc.W_x", 2, (int[]){3, variant == OTHER_DIMS ? 5 : 4});
    params_add(p, variant == OTHER_NAME ? "enc.bias" : "enc.b", 1, (int[]){4});
    if (variant != FEWER_TENSORS) params_add(p, "dec.W", 3, (int[]){2, 3, 5});
    if (variant == EXTRA_TENSOR) params_add(p, "dec.b", 1, (int[]){5});
    assert_int_equal(params_alloc(p), 0);
}

static void fill(Params *p, float start, float step) {
    for (size_t i = 0; i < p->size; i++) p->data[i] = start + step * (float)i;
}

static void path_in_tmp(char *out, size_t outlen, const char *name) {
    snprintf(out, outlen, "%s/%s", tmp_dir, name);
}

/* Save the standard model to "name" and return the file's bytes. */
static unsigned char *saved_bytes(const char *name, size_t *size) {
    Params p;
    build_model(&p, SAME);
    fill(&p, -3.0f, 0.25f);
    char path[512];
    path_in_tmp(path, sizeof path, name);
    assert_int_equal(checkpoint_save(path, CONFIG, &p), 0);
    params_free(&p);
    unsigned char *bytes = (unsigned char *)read_whole_file(path, size);
    assert_non_null(bytes);
    return bytes;
}

static void write_bytes(const char *name, const unsigned char *bytes, size_t size) {
    char path[512];
    path_in_tmp(path, sizeof path, name);
    assert_int_equal(write_file_atomic(path, bytes, size), 0);
}

/* Try to load "name" into a model of the given variant whose parameters hold
 * a sentinel pattern; the load must fail, leave every parameter untouched,
 * and its message must contain each of the expected fragments (NULL-ended). */
static void expect_load_failure(const char *name, int variant, ...) {
    char path[512];
    path_in_tmp(path, sizeof path, name);
    Params p;
    build_model(&p, variant);
    fill(&p, 100.0f, 1.0f);
    clear_error();
    assert_int_equal(checkpoint_load(path, &p), -1);
    for (size_t i = 0; i < p.size; i++) assert_true(p.data[i] == 100.0f + (float)i);
    params_free(&p);

    const char *msg = last_error();
    va_list ap;
    va_start(ap, variant);
    for (const char *want = va_arg(ap, const char *); want != NULL; want = va_arg(ap, const char *)) {
        if (strstr(msg, want) == NULL) fail_msg("message '%s' lacks '%s'", msg, want);
    }
    va_end(ap);
}

static void put_u32(unsigned char *at, uint32_t v) {
    at[0] = (unsigned char)v;
    at[1] = (unsigned char)(v >> 8);
    at[2] = (unsigned char)(v >> 16);
    at[3] = (unsigned char)(v >> 24);
}

static int count_leftover_tmp_files(void) {
    DIR *d = opendir(tmp_dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d))
        if (strstr(e->d_name, ".tmp.") != NULL) n++;
    closedir(d);
    return n;
}

static int setup_dir(void **state) {
    (void)state;
    return temp_dir_make(tmp_dir, sizeof tmp_dir, "test_checkpoint");
}

static int remove_dir(void **state) {
    (void)state;
    return temp_dir_remove(tmp_dir);
}

/* Byte offsets in the standard file (see the format in checkpoint.h). */
static size_t config_len(void) { return strlen(CONFIG); }
static size_t tensors_at(void) { return 16 + config_len() + 4; }   /* first tensor entry */

/* -------------------------------------------------------------------- tests */

static void test_round_trip(void **state) {
    (void)state;
    Params saved, loaded;
    build_model(&saved, SAME);
    fill(&saved, -3.0f, 0.25f);
    saved.data[5] = 1e-30f;          /* a few awkward values */
    saved.data[6] = -0.0f;
    saved.data[7] = 3.4e38f;
    char path[512];
    path_in_tmp(path, sizeof path, "round.ckpt");
    assert_int_equal(checkpoint_save(path, CONFIG, &saved), 0);

    build_model(&loaded, SAME);
    assert_int_equal(checkpoint_load(path, &loaded), 0);
    assert_memory_equal(saved.data, loaded.data, saved.size * sizeof(float));

    char *config = NULL;
    assert_int_equal(checkpoint_read_config(path, &config), 0);
    assert_string_equal(config, CONFIG);
    free(config);
    params_free(&saved);
    params_free(&loaded);
}

static void test_file_layout(void **state) {
    (void)state;
    size_t size;
    unsigned char *b = saved_bytes("layout.ckpt", &size);
    /* magic, version 1 little-endian, config length, config text */
    assert_memory_equal(b, "ATTNCKPT", 8);
    assert_memory_equal(b + 8, "\x01\x00\x00\x00", 4);
    assert_int_equal(b[12], config_len());
    assert_memory_equal(b + 16, CONFIG, config_len());
    assert_int_equal(b[16 + config_len()], 3);            /* tensor count */
    /* first tensor: name length 7 "enc.W_x", 2 dims 3 x 4, then -3.0f */
    const unsigned char *t = b + tensors_at();
    assert_int_equal(t[0], 7);
    assert_memory_equal(t + 4, "enc.W_x", 7);
    assert_int_equal(t[11], 2);
    assert_int_equal(t[15], 3);
    assert_int_equal(t[19], 4);
    float first;
    memcpy(&first, t + 23, 4);                            /* host is little-endian here */
    assert_true(first == -3.0f);
    /* total: header + 3 tensor headers + 38 floats + CRC */
    size_t expected = 16 + config_len() + 4 + (4 + 7 + 4 + 8) + (4 + 5 + 4 + 4) + (4 + 5 + 4 + 12) +
                      4 * (12 + 4 + 30) + 4;
    assert_int_equal(size, expected);
    free(b);
}

static void test_missing_file(void **state) {
    (void)state;
    expect_load_failure("does_not_exist.ckpt", SAME, "does_not_exist.ckpt", "No such file", NULL);
    char *config = (char *)"untouched";
    assert_int_equal(checkpoint_read_config("/nonexistent/dir/x.ckpt", &config), -1);
    assert_null(config);
    assert_non_null(strstr(last_error(), "/nonexistent/dir/x.ckpt"));
}

static void test_wrong_magic(void **state) {
    (void)state;
    const char *text = "this is a text file, not a checkpoint\n";
    write_bytes("text.ckpt", (const unsigned char *)text, strlen(text));
    expect_load_failure("text.ckpt", SAME, "text.ckpt", "not a checkpoint", NULL);
    write_bytes("empty.ckpt", (const unsigned char *)"", 0);
    expect_load_failure("empty.ckpt", SAME, "not a checkpoint", NULL);
}

static void test_unsupported_version(void **state) {
    (void)state;
    size_t size;
    unsigned char *b = saved_bytes("v99.ckpt", &size);
    put_u32(b + 8, 99);
    write_bytes("v99.ckpt", b, size);
    expect_load_failure("v99.ckpt", SAME, "version 99", "version 1", NULL);
    char path[512], *config = NULL;
    path_in_tmp(path, sizeof path, "v99.ckpt");
    assert_int_equal(checkpoint_read_config(path, &config), -1);
    assert_null(config);
    assert_non_null(strstr(last_error(), "version 99"));
    free(b);
}

static void test_truncated_everywhere(void **state) {
    (void)state;
    size_t size;
    unsigned char *b = saved_bytes("full.ckpt", &size);
    /* In the magic, the version, the config length, the config, the tensor
     * count, a tensor's name, its dims, its values, and the CRC. */
    size_t cuts[] = {5, 10, 14, 16 + 3, 16 + config_len() + 2, tensors_at() + 6, tensors_at() + 13,
                     tensors_at() + 30, size - 40, size - 4, size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        write_bytes("cut.ckpt", b, cuts[i]);
        char at[64];
        snprintf(at, sizeof at, "ends at byte %zu", cuts[i]);
        expect_load_failure("cut.ckpt", SAME, "cut.ckpt", "truncated", "byte offset", "expected", at, NULL);
        char path[512], *config = NULL;
        path_in_tmp(path, sizeof path, "cut.ckpt");
        assert_int_equal(checkpoint_read_config(path, &config), -1);
        assert_null(config);
    }
    /* Each message says what was expected where: check two of them. */
    write_bytes("cut.ckpt", b, size - 1);
    expect_load_failure("cut.ckpt", SAME, "CRC-32", NULL);
    write_bytes("cut.ckpt", b, size - 40);
    expect_load_failure("cut.ckpt", SAME, "values of tensor 2 'dec.W'", NULL);
    free(b);
}

static void test_flipped_byte_is_a_crc_error(void **state) {
    (void)state;
    size_t size;
    unsigned char *b = saved_bytes("flip.ckpt", &size);
    size_t positions[] = {20, size - 30, size - 2};   /* config text, a value, the CRC itself */
    for (size_t i = 0; i < sizeof positions / sizeof positions[0]; i++) {
        b[positions[i]] ^= 0x10;
        write_bytes("flip.ckpt", b, size);
        expect_load_failure("flip.ckpt", SAME, "flip.ckpt", "corrupted", "CRC", NULL);
        char path[512], *config = NULL;
        path_in_tmp(path, sizeof path, "flip.ckpt");
        assert_int_equal(checkpoint_read_config(path, &config), -1);
        assert_null(config);
        b[positions[i]] ^= 0x10;
    }
    free(b);
}

static void test_absurd_lengths_are_refused(void **state) {
    (void)state;
    size_t size;
    unsigned char *b = saved_bytes("absurd.ckpt", &size);
    unsigned char *copy = malloc(size);

    memcpy(copy, b, size);
    put_u32(copy + 12, 0xFFFFFFF0u);                        /* config length */
    write_bytes("absurd.ckpt", copy, size);
    expect_load_failure("absurd.ckpt", SAME, "config length", "byte offset 12", NULL);

    memcpy(copy, b, size);
    put_u32(copy + 16 + config_len(), 1000000u);             /* tensor count */
    write_bytes("absurd.ckpt", copy, size);
    expect_load_failure("absurd.ckpt", SAME, "tensor count", NULL);

    memcpy(copy, b, size);
    put_u32(copy + tensors_at(), 0x7FFFFFFFu);               /* name length */
    write_bytes("absurd.ckpt", copy, size);
    expect_load_failure("absurd.ckpt", SAME, "name length", NULL);

    memcpy(copy, b, size);
    put_u32(copy + tensors_at() + 11, 77u);                  /* ndim */
    write_bytes("absurd.ckpt", copy, size);
    expect_load_failure("absurd.ckpt", SAME, "77 dims", "enc.W_x", NULL);

    memcpy(copy, b, size);
    put_u32(copy + tensors_at() + 15, 0xFFFFFFFFu);          /* a dim */
    write_bytes("absurd.ckpt", copy, size);
    expect_load_failure("absurd.ckpt", SAME, "enc.W_x", NULL);

    memcpy(copy, b, size);
    put_u32(copy + tensors_at() + 15, 60000u);               /* a dim too big for the file */
    put_u32(copy + tensors_at() + 19, 60000u);
    write_bytes("absurd.ckpt", copy, size);
    expect_load_failure("absurd.ckpt", SAME, "truncated", "enc.W_x", NULL);

    free(copy);
    free(b);
}

static void test_layout_mismatch_names_the_tensor(void **state) {
    (void)state;
    size_t size;
    free(saved_bytes("model.ckpt", &size));
    expect_load_failure("model.ckpt", OTHER_DIMS, "tensor 0 'enc.W_x'", "[3,4]", "[3,5]", NULL);
    expect_load_failure("model.ckpt", OTHER_NAME, "tensor 1", "'enc.b'", "'enc.bias'", NULL);
    expect_load_failure("model.ckpt", EXTRA_TENSOR, "3 tensors", "expects 4", NULL);
    expect_load_failure("model.ckpt", FEWER_TENSORS, "3 tensors", "expects 2", NULL);
}

static void test_save_over_existing_is_atomic(void **state) {
    (void)state;
    Params p;
    build_model(&p, SAME);
    char path[512];
    path_in_tmp(path, sizeof path, "again.ckpt");
    fill(&p, 1.0f, 1.0f);
    assert_int_equal(checkpoint_save(path, CONFIG, &p), 0);
    fill(&p, 2.0f, 1.0f);
    assert_int_equal(checkpoint_save(path, "task=reverse\n", &p), 0);
    assert_int_equal(count_leftover_tmp_files(), 0);

    Params q;
    build_model(&q, SAME);
    assert_int_equal(checkpoint_load(path, &q), 0);
    assert_memory_equal(p.data, q.data, p.size * sizeof(float));
    char *config = NULL;
    assert_int_equal(checkpoint_read_config(path, &config), 0);
    assert_string_equal(config, "task=reverse\n");
    free(config);

    /* A save that cannot happen (no such directory) says where and why,
     * and leaves nothing behind. */
    clear_error();
    assert_int_equal(checkpoint_save("/nonexistent_dir_for_test/x.ckpt", CONFIG, &p), -1);
    assert_non_null(strstr(last_error(), "/nonexistent_dir_for_test/x.ckpt"));
    assert_int_equal(count_leftover_tmp_files(), 0);
    params_free(&p);
    params_free(&q);
}

static void test_config_helpers(void **state) {
    (void)state;
    const char *text = "task=dates\nhidden=64\nbad=12abc\nbig=99999999999\nempty=\nlast=7";
    char value[32];
    int n = 0;
    assert_int_equal(config_get(text, "task", value, sizeof value), 0);
    assert_string_equal(value, "dates");
    assert_int_equal(config_get(text, "empty", value, sizeof value), 0);
    assert_string_equal(value, "");
    assert_int_equal(config_get_int(text, "hidden", &n), 0);
    assert_int_equal(n, 64);
    assert_int_equal(config_get_int(text, "last", &n), 0);   /* no final newline */
    assert_int_equal(n, 7);

    /* config_get_or: the line's value when there is one, else the fallback */
    assert_int_equal(config_get_or(text, "task", "none", value, sizeof value), 0);
    assert_string_equal(value, "dates");
    assert_int_equal(config_get_or(text, "empty", "none", value, sizeof value), 0);
    assert_string_equal(value, "");
    assert_int_equal(config_get_or(text, "hid", "0", value, sizeof value), 0);   /* a prefix is not a key */
    assert_string_equal(value, "0");
    assert_int_equal(config_get_or(text, "task", "none", value, 4), -1);         /* "dates" does not fit */
    assert_non_null(strstr(last_error(), "'task'"));
    assert_int_equal(config_get_or(text, "layers", "a fallback too long", value, 8), -1);

    /* config_get_float_in: a number in range, the fallback without the line, else one error naming all */
    const char *numbers = "p=0.25\nq=1\nwords=most\nempty=\nminus=-0.5\n";
    float x = 0.0f;
    assert_int_equal(config_get_float_in(numbers, "p", NULL, 0.0f, 1.0f, 1, &x), 0);
    assert_true(x == 0.25f);
    assert_int_equal(config_get_float_in(numbers, "q", NULL, 0.0f, 1.0f, 0, &x), 0);   /* [0, 1]: 1 is in */
    assert_true(x == 1.0f);
    assert_int_equal(config_get_float_in(numbers, "r", "0.5", 0.0f, 1.0f, 0, &x), 0);   /* no line: fallback */
    assert_true(x == 0.5f);
    assert_int_equal(config_get_float_in(numbers, "q", NULL, 0.0f, 1.0f, 1, &x), -1);   /* [0, 1): 1 is out */
    assert_string_equal(last_error(), "q=1: expected a number in [0, 1)");
    assert_int_equal(config_get_float_in(numbers, "minus", NULL, 0.0f, 1.0f, 0, &x), -1);
    assert_string_equal(last_error(), "minus=-0.5: expected a number in [0, 1]");
    assert_int_equal(config_get_float_in(numbers, "words", NULL, 0.0f, 1.0f, 0, &x), -1);
    assert_string_equal(last_error(), "words=most: expected a number in [0, 1]");
    assert_int_equal(config_get_float_in(numbers, "empty", "0", 0.0f, 1.0f, 0, &x), -1);   /* an empty value is no 0 */
    assert_string_equal(last_error(), "empty=: expected a number in [0, 1]");
    assert_int_equal(config_get_float_in(numbers, "r", NULL, 0.0f, 1.0f, 0, &x), -1);   /* required, missing */
    assert_non_null(strstr(last_error(), "missing key 'r'"));

    assert_int_equal(config_get(text, "hid", value, sizeof value), -1);   /* a prefix is not a key */
    assert_non_null(strstr(last_error(), "missing key 'hid'"));
    assert_int_equal(config_get_int(text, "layers", &n), -1);
    assert_non_null(strstr(last_error(), "'layers'"));
    assert_int_equal(config_get_int(text, "bad", &n), -1);
    assert_non_null(strstr(last_error(), "expected an integer, got '12abc'"));
    assert_int_equal(config_get_int(text, "big", &n), -1);
    assert_non_null(strstr(last_error(), "'big'"));
    assert_int_equal(config_get_int(text, "empty", &n), -1);
    assert_int_equal(config_get(text, "task", value, 3), -1);             /* too long for out */
    assert_non_null(strstr(last_error(), "'task'"));
    assert_int_equal(n, 7);                                               /* unchanged */
}

/* A checkpoint with a training state (version 2): the weights load as from
 * any checkpoint, every kind of item reads back to the same bits, and a
 * state that is not there, or not of the kind and count asked for, is
 * refused by name. */
static void test_training_state_round_trip(void **state) {
    (void)state;
    Params p, q;
    build_model(&p, SAME);
    build_model(&q, SAME);
    fill(&p, 1.0f, 0.5f);
    int ints[3] = {7, -2, 2147483647};
    long longs[2] = {-5, 9000000000L};
    uint64_t u64s[2] = {0x853c49e6748fea9bULL, 0xda3e39cb94b95bdbULL};
    float floats[2] = {0.1f, -0.0f};
    double doubles[1] = {1.0 / 3.0};
    const StateItem items[5] = {{"ints", STATE_INT, ints, 3}, {"longs", STATE_LONG, longs, 2},
                                {"rng", STATE_U64, u64s, 2}, {"floats", STATE_FLOAT, floats, 2},
                                {"doubles", STATE_DOUBLE, doubles, 1}};
    char path[512], plain[512];
    path_in_tmp(path, sizeof path, "state.ckpt");
    path_in_tmp(plain, sizeof plain, "no_state.ckpt");
    assert_int_equal(checkpoint_save_with_state(path, CONFIG, &p, items, 5), 0);
    assert_int_equal(checkpoint_save(plain, CONFIG, &p), 0);
    assert_int_equal(checkpoint_load(path, &q), 0);
    assert_memory_equal(q.data, p.data, sizeof(float) * p.size);

    int ints2[3];
    long longs2[2];
    uint64_t u64s2[2];
    float floats2[2];
    double doubles2[1];
    StateItem back[5] = {{"doubles", STATE_DOUBLE, doubles2, 1}, {"rng", STATE_U64, u64s2, 2},
                         {"ints", STATE_INT, ints2, 3}, {"floats", STATE_FLOAT, floats2, 2},
                         {"longs", STATE_LONG, longs2, 2}};
    assert_int_equal(checkpoint_load_state(path, back, 5), 0);
    assert_memory_equal(ints2, ints, sizeof ints);
    assert_memory_equal(longs2, longs, sizeof longs);
    assert_memory_equal(u64s2, u64s, sizeof u64s);
    assert_memory_equal(floats2, floats, sizeof floats);
    assert_memory_equal(doubles2, doubles, sizeof doubles);

    StateItem missing = {"adam.m", STATE_FLOAT, floats2, 2};
    assert_int_equal(checkpoint_load_state(path, &missing, 1), -1);
    assert_non_null(strstr(last_error(), "has no 'adam.m'"));
    StateItem other = {"ints", STATE_INT, ints2, 2};
    assert_int_equal(checkpoint_load_state(path, &other, 1), -1);
    assert_non_null(strstr(last_error(), "holds 3 of int, this run expects 2 of int"));
    assert_int_equal(checkpoint_load_state(plain, back, 5), -1);
    assert_non_null(strstr(last_error(), "holds no training state"));

    /* cut inside the state: a truncated file, named as such */
    size_t size;
    unsigned char *bytes = (unsigned char *)read_whole_file(path, &size);
    assert_non_null(bytes);
    write_bytes("state_cut.ckpt", bytes, size - 12);
    char cut[512];
    path_in_tmp(cut, sizeof cut, "state_cut.ckpt");
    assert_int_equal(checkpoint_load(cut, &q), -1);
    assert_non_null(strstr(last_error(), "truncated"));
    free(bytes);
    params_free(&p);
    params_free(&q);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_training_state_round_trip),
        cmocka_unit_test(test_file_layout),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_wrong_magic),
        cmocka_unit_test(test_unsupported_version),
        cmocka_unit_test(test_truncated_everywhere),
        cmocka_unit_test(test_flipped_byte_is_a_crc_error),
        cmocka_unit_test(test_absurd_lengths_are_refused),
        cmocka_unit_test(test_layout_mismatch_names_the_tensor),
        cmocka_unit_test(test_save_over_existing_is_atomic),
        cmocka_unit_test(test_config_helpers),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
