/* reader.h - reading a file in pieces, each only when it is needed, so a
 * loader looks at a file's magic number and header before it reads (or
 * allocates for) the rest, and never reads more than a limit.
 *
 * What read_whole_file (util.h) does in one call, a loader here does in steps:
 *
 *   FileReader r;
 *   if (reader_open(&r, path, READ_GZIP_BY_NAME, MAX_BYTES, "checkpoint") < 0) return -1;
 *   if (reader_need(&r, 8) < 0) ...          r.data[0..r.len) holds what was read;
 *   ... check the magic in r.data ...        r.len < 8 only at the end of the file
 *   if (reader_need(&r, 8 + n) < 0) ...      n from the header just read
 *   reader_close(&r);
 *
 * The file is opened once: a pipe (--load /dev/stdin), a FIFO or a device
 * (/dev/zero) is read like a plain file, and at most as far as the loader
 * asks. The buffer grows as bytes arrive (doubling), never ahead of them by
 * what a damaged header promises, and a file longer than max bytes is
 * refused with one message ("'bomb.txt.gz' holds more than 256 MiB, more than
 * a corpus may (...)"). A gzip file is decompressed as it is read
 * (zlib), so a gzip bomb costs only what the loader reads of it. */
#ifndef READER_H
#define READER_H
#include <stddef.h>
#include <zlib.h>

typedef enum {
    READ_PLAIN,          /* the bytes as they are */
    READ_GZIP,           /* gunzip, as zlib's gzread: gzip members are decompressed, other bytes read as they are */
    READ_GZIP_BY_NAME,   /* READ_GZIP when the name ends in ".gz", else READ_PLAIN (as read_whole_file) */
} ReadMode;

typedef struct {
    const char *path;
    const char *what;       /* "checkpoint", "PGM image": what a file too long is said not to be */
    size_t max;             /* the most bytes this file may hold */
    int fd;                 /* the file, opened once */
    int gzip;               /* 1: gunzip (READ_GZIP) */
    int inflating;          /* in a gzip member (z is live) */
    int plain;              /* a READ_GZIP file without the gzip magic: copied */
    int started;            /* the first bytes were looked at (gzip or not) */
    z_stream z;
    int z_live;             /* inflateInit2 was called on z */
    unsigned char *in;      /* raw input (gzip only) */
    size_t in_len;          /* raw bytes in `in` not yet given to inflate or copied */
    size_t in_at;           /* where they start */
    int in_eof;             /* the raw file has ended */
    size_t raw_read;        /* raw bytes read from the file so far */
    unsigned char *data;    /* what has been read: data[0..len), NUL-terminated */
    size_t len, cap;
    int eof;                /* the end of the (decompressed) file was met */
} FileReader;

/* Open path. mode as above; max: the longest file accepted (see the top);
 * what: a few words for the message about a file longer than max. Returns
 * 0, or -1 with fail() naming the path and the reason. */
int reader_open(FileReader *r, const char *path, ReadMode mode, size_t max, const char *what);

/* The first raw bytes of the file as stored (before any gunzipping), at most
 * n (n <= 16): how many there are, in *got. For a loader that names a file
 * that is not gzip'd by its first bytes. Returns 0, or -1 with fail(). */
int reader_raw_prefix(FileReader *r, unsigned char *out, size_t n, size_t *got);

/* Read until r->len >= want or the file ends (r->eof). Returns 0 - r->len may
 * be short only at the end of the file - or -1 with fail(): a read error,
 * damaged or truncated gzip data, or want beyond max when the file goes on. */
int reader_need(FileReader *r, size_t want);

/* Read the rest of the file (at most max bytes in all). 0, or -1 with fail(). */
int reader_rest(FileReader *r);

/* Close the file and free the buffer. */
void reader_close(FileReader *r);

/* Close the file and hand over the buffer (NUL-terminated; *len bytes
 * without the NUL), which the caller frees. */
unsigned char *reader_take(FileReader *r, size_t *len);

/* The whole file in one call, as read_whole_file but opened once and at most
 * max bytes; NULL with fail() on error. */
char *read_file_at_most(const char *path, ReadMode mode, size_t max, const char *what, size_t *len);

#endif
