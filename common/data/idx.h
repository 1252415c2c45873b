/* idx.h - read IDX files, the format MNIST and Fashion-MNIST come in.
 *
 * An IDX file is a small header followed by raw bytes:
 *
 *   bytes 0-1    0x00 0x00
 *   byte  2      the type of the data: 0x08 = unsigned byte (the only type read here)
 *   byte  3      the number of dimensions: 3 for images, 1 for labels
 *   then 4 bytes per dimension, big-endian (most significant byte first):
 *                images: count, rows, cols      labels: count
 *   then the data: count * rows * cols bytes (one byte per pixel, 0 = background,
 *                255 = full ink, image after image, each row after row), or count
 *                bytes of labels.
 *
 * Read as one big-endian number, bytes 0-3 are the "magic number": 0x00000803
 * for images and 0x00000801 for labels. Header sizes: 16 bytes (images), 8 (labels).
 *
 * The files are distributed gzip'd (*.gz). They are read through zlib's gzread,
 * which also reads a file that is NOT gzip'd, byte for byte: so an IDX file that
 * was gunzip'd (as torchvision keeps them) is accepted as well, whatever its name.
 * A file that is neither gzip nor IDX is refused by the magic-number check.
 *
 * Every check fails with ONE message (fail(), util/error.h) naming the file,
 * what was wrong (with the byte offset in the uncompressed stream) and what was
 * expected: a missing file, a cut-off header, a wrong magic number (first two
 * bytes, type byte, number of dimensions), dimensions that are 0, other than the
 * caller expects, or too large (over IDX_MAX_BYTES of data, checked before
 * anything is allocated), data shorter than the header announces (truncated),
 * data longer than it announces (a wrong count), or corrupt gzip data. */
#ifndef IDX_H
#define IDX_H
#include <stddef.h>

/* The largest data an IDX file may announce: 256 MiB. Fashion-MNIST's biggest
 * file holds 47 MB (60,000 x 28 x 28 bytes); a header claiming more than this is
 * damaged, and is refused before the buffer is allocated. Below the limit the
 * buffer grows with the bytes that actually arrive (from 1 MiB, doubling), so
 * a header that overstates the count costs at most twice the real data. */
#define IDX_MAX_BYTES ((size_t)256 << 20)

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u

typedef struct {
    int count;              /* images or labels in the file */
    int rows, cols;         /* image size; 1 and 1 for labels */
    unsigned char *data;    /* [count, rows, cols] bytes, row-major (malloc'd; idx_free) */
} IdxData;

/* Read an image file (magic 0x00000803). rows, cols: the image size the caller
 * expects (28, 28 for Fashion-MNIST), or 0, 0 to accept any size. Returns 0 and fills
 * *out, or -1 with fail() (and *out empty). */
int idx_read_images(IdxData *out, const char *path, int rows, int cols);

/* Read a label file (magic 0x00000801): out->rows = out->cols = 1. Returns 0, or
 * -1 with fail(). Label VALUES are not checked here (the data set knows how many
 * classes it has). */
int idx_read_labels(IdxData *out, const char *path);

/* Free the data and zero *d (safe on a zeroed or already freed IdxData). */
void idx_free(IdxData *d);

#endif
