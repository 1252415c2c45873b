/* task_dates.c - the "dates" task: a date written by a human in one of
 * DATE_N_FORMATS styles -> the same date in ISO form "YYYY-MM-DD".
 *
 * Why this task: the output is short and easy to check, yet the model must
 * learn a real alignment. Most input styles put the year LAST while ISO puts
 * it first, so the attention heatmap is not a simple diagonal: the first
 * output characters look at the end of the input. Two styles put the year
 * first, for contrast.
 *
 * Dates run from 1950-01-01 to 2049-12-31; two-digit years map into that
 * range (50..99 -> 1950..1999, 00..49 -> 2000..2049), so no string is
 * ambiguous. The numeric styles read month/day with '/', and day.month with
 * '.' or '-', never both orders with one separator.
 *
 * Splits are disjoint by calendar day: each day goes to train (80%), valid
 * (10%) or test (10%) by a hash of (data seed, day), so a test day never
 * appears in training in any style. Each split then draws distinct
 * (day, style) pairs from its own days with a PCG32 stream of the seed. */
#include "data/dataset.h"
#include "data/dataset_tasks.h"
#include "util/error.h"
#include "util/rng.h"
#include "util/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIRST_YEAR 1950
#define LAST_YEAR 2049
#define DATE_TEXT_MAX 64

static const char *const month_names[12] = {
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December"};
static const char *const month_abbr[12] = {
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
static const char *const month_abbr_lower[12] = {
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"};
static const char *const month_abbr_upper[12] = {
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
/* Index 0 = Sunday, as returned by day_of_week(). */
static const char *const weekday_names[7] = {
    "Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
static const char *const weekday_abbr[7] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};

static int is_leap_year(int year) {
    return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
}

static int days_in_month(int year, int month) {
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return month == 2 && is_leap_year(year) ? 29 : days[month - 1];
}

/* Day of the week, 0 = Sunday .. 6 = Saturday (Tomohiko Sakamoto's method).
 * January and February count as months 13 and 14 of the previous year, which
 * the table t[] and the "year -= month < 3" line take care of. */
static int day_of_week(int year, int month, int day) {
    static const int t[12] = {0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4};
    if (month < 3) year -= 1;
    return (year + year / 4 - year / 100 + year / 400 + t[month - 1] + day) % 7;
}

/* "st", "nd", "rd" or "th": 1st 2nd 3rd 4th .. 11th 12th 13th .. 21st 22nd 23rd .. 31st. */
static const char *ordinal_suffix(int day) {
    if (day >= 11 && day <= 13) return "th";
    switch (day % 10) {
    case 1: return "st";
    case 2: return "nd";
    case 3: return "rd";
    default: return "th";
    }
}

/* The styles, shown for Saturday 2026-11-21 (and Sunday 2026-01-04 where
 * padding or abbreviation shows):
 *   0  Saturday, 21 November 2026          10  the 21st of November, 2026
 *   1  11/21/26       (1/4/26)             11  11/21/2026    (01/04/2026)
 *   2  21st of Nov. 2026 (4th of May 2026) 12  2026/11/21    (2026/01/04)   year first
 *   3  2026 Nov 21    (2026 Jan 4)  year first  13  Sat, Nov 21, 2026
 *   4  21.11.2026     (04.01.2026)         14  21 November 2026
 *   5  November 21, 2026                   15  November 21st, 2026
 *   6  nov 21 2026                         16  Saturday, November 21, 2026
 *   7  21 NOV 2026    (04 JAN 2026)        17  21 Nov 26
 *   8  Sat 21 Nov 2026                     18  21-Nov-2026   (04-Jan-2026)
 *   9  21-11-2026     (4-1-2026)           19  21st November 2026 */
void date_format(int year, int month, int day, int format, char *out, int outlen) {
    if (outlen <= 0) return;
    out[0] = '\0';
    if (month < 1 || month > 12 || day < 1 || day > 31) return;
    const char *month_name = month_names[month - 1];
    const char *month_short = month_abbr[month - 1];
    const char *weekday = weekday_names[day_of_week(year, month, day)];
    const char *weekday_short = weekday_abbr[day_of_week(year, month, day)];
    const char *suffix = ordinal_suffix(day);
    int year2 = year % 100;
    /* "Nov." but "May": only a shortened name gets a period. */
    const char *abbr_period = strcmp(month_short, month_name) == 0 ? "" : ".";
    size_t n = (size_t)outlen;

    switch (format) {
    case 0: snprintf(out, n, "%s, %d %s %d", weekday, day, month_name, year); break;
    case 1: snprintf(out, n, "%d/%d/%02d", month, day, year2); break;
    case 2: snprintf(out, n, "%d%s of %s%s %d", day, suffix, month_short, abbr_period, year); break;
    case 3: snprintf(out, n, "%d %s %d", year, month_short, day); break;
    case 4: snprintf(out, n, "%02d.%02d.%d", day, month, year); break;
    case 5: snprintf(out, n, "%s %d, %d", month_name, day, year); break;
    case 6: snprintf(out, n, "%s %d %d", month_abbr_lower[month - 1], day, year); break;
    case 7: snprintf(out, n, "%02d %s %d", day, month_abbr_upper[month - 1], year); break;
    case 8: snprintf(out, n, "%s %d %s %d", weekday_short, day, month_short, year); break;
    case 9: snprintf(out, n, "%d-%d-%d", day, month, year); break;
    case 10: snprintf(out, n, "the %d%s of %s, %d", day, suffix, month_name, year); break;
    case 11: snprintf(out, n, "%02d/%02d/%d", month, day, year); break;
    case 12: snprintf(out, n, "%d/%02d/%02d", year, month, day); break;
    case 13: snprintf(out, n, "%s, %s %d, %d", weekday_short, month_short, day, year); break;
    case 14: snprintf(out, n, "%d %s %d", day, month_name, year); break;
    case 15: snprintf(out, n, "%s %d%s, %d", month_name, day, suffix, year); break;
    case 16: snprintf(out, n, "%s, %s %d, %d", weekday, month_name, day, year); break;
    case 17: snprintf(out, n, "%d %s %02d", day, month_short, year2); break;
    case 18: snprintf(out, n, "%02d-%s-%d", day, month_short, year); break;
    case 19: snprintf(out, n, "%d%s %s %d", day, suffix, month_name, year); break;
    default: break; /* unknown style: empty string */
    }
}

/* Every day of the range, as (year, month, day), in calendar order. */
typedef struct { short year; signed char month, day; } Day;

static int build_days(Day **days_out) {
    int n = 0;
    for (int y = FIRST_YEAR; y <= LAST_YEAR; y++) n += is_leap_year(y) ? 366 : 365;
    Day *days = xmalloc(sizeof(Day) * (size_t)n);
    int i = 0;
    for (int y = FIRST_YEAR; y <= LAST_YEAR; y++) {
        for (int m = 1; m <= 12; m++) {
            for (int d = 1; d <= days_in_month(y, m); d++) {
                days[i].year = (short)y;
                days[i].month = (signed char)m;
                days[i].day = (signed char)d;
                i++;
            }
        }
    }
    *days_out = days;
    return n;
}

/* 0 = train, 1 = valid, 2 = test: 80% / 10% / 10% of the days, by hash. */
static int day_split(uint64_t seed, int day_index) {
    uint64_t h = hash_mix64(hash_mix64(seed) ^ (uint64_t)day_index);
    int bucket = (int)(h % 100);
    if (bucket < 80) return 0;
    if (bucket < 90) return 1;
    return 2;
}

/* The source alphabet: every character any style can produce, in ASCII
 * order. One leap year covers every month, weekday, day number (and so every
 * digit) and ordinal suffix, so rendering all of its days in every style
 * finds them all, independently of the sampled data. */
static int build_source_vocab(Vocab *v) {
    int seen[256] = {0};
    char text[DATE_TEXT_MAX];
    for (int m = 1; m <= 12; m++) {
        for (int d = 1; d <= days_in_month(2000, m); d++) {
            for (int f = 0; f < DATE_N_FORMATS; f++) {
                date_format(2000, m, d, f, text, sizeof text);
                for (const char *p = text; *p; p++) seen[(unsigned char)*p] = 1;
            }
        }
    }
    for (int c = 1; c < 256; c++) {
        if (!seen[c]) continue;
        char token[2] = {(char)c, '\0'};
        if (vocab_add(v, token) < 0) return -1;
    }
    return 0;
}

/* Draw n distinct (day, style) pairs from the days of split `which`. */
static int sample_split(Dataset *d, Split *s, int n, int which, const char *name,
                        const Day *days, int n_days, uint64_t seed) {
    /* Candidate pairs, encoded as day_index * DATE_N_FORMATS + style. */
    int n_candidates = 0;
    for (int i = 0; i < n_days; i++) {
        if (day_split(seed, i) == which) n_candidates += DATE_N_FORMATS;
    }
    if (n > n_candidates) {
        return fail("dates: n_%s is %d, more than the %d distinct (day, style) pairs of the "
                    "%s days", name, n, n_candidates, name);
    }
    int *candidates = xmalloc(sizeof(int) * (size_t)(n_candidates > 0 ? n_candidates : 1));
    int k = 0;
    for (int i = 0; i < n_days; i++) {
        if (day_split(seed, i) != which) continue;
        for (int f = 0; f < DATE_N_FORMATS; f++) candidates[k++] = i * DATE_N_FORMATS + f;
    }

    /* A partial Fisher-Yates shuffle: the first n entries become a uniform
     * random sample without repetition. One random stream per split. */
    Rng rng;
    rng_seed(&rng, seed, (uint64_t)(which + 1));
    split_alloc(s, n);
    char text[DATE_TEXT_MAX], iso[24];
    for (int j = 0; j < n; j++) {
        int pick = j + (int)rng_below(&rng, (uint32_t)(n_candidates - j));
        int chosen = candidates[pick];
        candidates[pick] = candidates[j];
        candidates[j] = chosen;

        const Day *day = &days[chosen / DATE_N_FORMATS];
        date_format(day->year, day->month, day->day, chosen % DATE_N_FORMATS, text, sizeof text);
        snprintf(iso, sizeof iso, "%04d-%02d-%02d", day->year, day->month, day->day);
        example_from_chars(&s->ex[j], &d->src_vocab, text, &d->tgt_vocab, iso);
    }
    free(candidates);
    return 0;
}

int dates_load(Dataset *d, const TaskConfig *cfg) {
    vocab_init(&d->src_vocab);
    vocab_init(&d->tgt_vocab);
    if (build_source_vocab(&d->src_vocab) != 0) return -1;
    const char *target_chars = "0123456789-";
    for (const char *p = target_chars; *p; p++) {
        char token[2] = {*p, '\0'};
        if (vocab_add(&d->tgt_vocab, token) < 0) return -1;
    }
    d->src_sep = "";
    d->tgt_sep = "";

    Day *days;
    int n_days = build_days(&days);
    int rc = sample_split(d, &d->train, cfg->n_train, 0, "train", days, n_days, cfg->seed);
    if (rc == 0) rc = sample_split(d, &d->valid, cfg->n_valid, 1, "valid", days, n_days, cfg->seed);
    if (rc == 0) rc = sample_split(d, &d->test, cfg->n_test, 2, "test", days, n_days, cfg->seed);
    free(days);
    return rc;
}
