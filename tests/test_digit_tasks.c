/* test_digit_tasks.c - the digit tasks of chapters 04 and 05
 * (common/data/digit_tasks.h):
 *  - every task's targets against its definition, on random sequences;
 *  - the class counts, names both ways, and the typed-digit parser;
 *  - the ExampleTask face the driver uses: the same examples as the plain
 *    functions, and --input text with its targets. */
#include <stdio.h>
#include <string.h>

#include "data/digit_tasks.h"
#include "util/error.h"
#include "util/rng.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

static int count_in(const int *x, int N, int digit) {
    int c = 0;
    for (int j = 0; j < N; j++) c += x[j] == digit;
    return c;
}

static void test_chapter04_tasks(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 6, 0);
    enum { B = 20, N = 7 };
    int x[B * N], y[B * N];
    digit_task_batch(TASK_REVERSE, x, y, B, N, &r);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++) assert_int_equal(y[b * N + i], x[b * N + N - 1 - i]);
    digit_task_batch(TASK_SORT, x, y, B, N, &r);
    for (int b = 0; b < B; b++) {
        int hx[10] = {0}, hy[10] = {0};
        for (int i = 0; i < N; i++) {
            hx[x[b * N + i]]++;
            hy[y[b * N + i]]++;
            if (i > 0) assert_true(y[b * N + i - 1] <= y[b * N + i]);
        }
        assert_memory_equal(hx, hy, sizeof hx);
    }
    digit_task_batch(TASK_COUNT, x, y, B, N, &r);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++) assert_int_equal(y[b * N + i], count_in(x + b * N, N, x[b * N + i]));
    assert_int_equal(digit_task_classes(TASK_COUNT, N), N + 1);
    assert_int_equal(digit_task_classes(TASK_REVERSE, N), 10);
}

static void test_chapter05_tasks(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 5, 0);
    enum { B = 10, N = 6 };
    int x[B * N], y[B * N];
    digit_task_batch(TASK_NEIGHBOURS, x, y, B, N, &r);     /* y_i = 10 x_{i-1} + x_{i+1}, wrapping */
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++) {
            int left = x[b * N + (i + N - 1) % N], right = x[b * N + (i + 1) % N];
            assert_int_equal(y[b * N + i], 10 * left + right);
            assert_in_range(y[b * N + i], 0, digit_task_classes(TASK_NEIGHBOURS, N) - 1);
        }
    digit_task_batch(TASK_COUNT_NEXT, x, y, B, N, &r);     /* y_i = 10 count(x_i) + x_{i+1}, wrapping */
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++) {
            int count = count_in(x + b * N, N, x[b * N + i]);
            assert_int_equal(y[b * N + i], 10 * count + x[b * N + (i + 1) % N]);
            assert_in_range(y[b * N + i], 10, digit_task_classes(TASK_COUNT_NEXT, N) - 1);
        }
}

static void test_names_and_parser(void **state) {
    (void)state;
    for (int t = 0; t < DIGIT_N_TASKS; t++) {
        DigitTask back;
        assert_int_equal(digit_task_from_name(digit_task_name((DigitTask)t), &back), 0);
        assert_int_equal(back, t);
    }
    DigitTask t;
    assert_int_equal(digit_task_from_name("reverse_", &t), -1);
    assert_non_null(strstr(last_error(), "count_next"));
    int x[4];
    assert_int_equal(digits_parse("3 1,4\t1", 4, x), 0);
    assert_int_equal(x[0] * 1000 + x[1] * 100 + x[2] * 10 + x[3], 3141);
    assert_int_equal(digits_parse("31415", 4, x), -1);
    assert_non_null(strstr(last_error(), "expected 4 digits"));
    assert_int_equal(digits_parse("31a4", 4, x), -1);
    assert_non_null(strstr(last_error(), "'a' at character 3"));
}

/* The ExampleTask face gives the examples of the plain functions. */
static void test_example_task(void **state) {
    (void)state;
    enum { B = 5, N = 8 };
    DigitTaskSpec spec;
    ExampleTask t;
    assert_int_equal(digit_task_from_config("model=m\ntask=count_next\nlen=8\n", &spec, &t), 0);
    assert_int_equal(t.n_in, N);
    assert_int_equal(t.n_out, N);
    assert_int_equal(t.classes, 90);
    Examples e;
    examples_alloc(&e, B, N, N, 0);
    Rng r1, r2;
    rng_seed(&r1, 3, 99);
    rng_seed(&r2, 3, 99);
    t.test_batch(t.self, &e, B, &r1);
    int x[B * N], y[B * N];
    digit_task_batch(TASK_COUNT_NEXT, x, y, B, N, &r2);
    assert_int_equal(e.B, B);
    assert_memory_equal(e.tokens, x, sizeof x);
    assert_memory_equal(e.targets, y, sizeof y);
    assert_int_equal(t.parse_input(t.self, "1 1 2 3 5 8 1 3", &e), 0);
    assert_int_equal(e.B, 1);
    assert_int_equal(e.targets[0], 10 * 3 + 1);              /* three 1s, then a 1 */
    char text[16];
    t.input_text(t.self, &e, 0, 5, text, sizeof text);
    assert_string_equal(text, "8");
    assert_int_equal(t.parse_input(t.self, "1 2", &e), -1);
    assert_int_equal(digit_task_from_config("task=count_next\nlen=99\n", &spec, &t), -1);
    assert_non_null(strstr(last_error(), "len"));
    examples_free(&e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chapter04_tasks),
        cmocka_unit_test(test_chapter05_tasks),
        cmocka_unit_test(test_names_and_parser),
        cmocka_unit_test(test_example_task),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
