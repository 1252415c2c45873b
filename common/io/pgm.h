/* pgm.h - read and write grey images in the PGM format (netpbm), for
 * classifying a user's own picture with chapter 07's ViT.
 *
 * A PGM file is a short text header and the pixels:
 *
 *   P5                 the magic: P5 = binary pixels, P2 = pixels as decimal text
 *   # a comment        (anywhere in the header, up to the end of the line)
 *   640 480            width and height
 *   255                maxval: the value of white (1..65535)
 *   <pixels>           height rows of width values, top row first, 0 = black.
 *                      P5: after ONE whitespace byte, one byte per pixel
 *                      (maxval < 256) or two, most significant first; P2: decimal
 *                      numbers separated by whitespace.
 *
 * Any image editor writes it (GIMP "Export as PGM", ImageMagick
 * `convert photo.jpg -colorspace gray photo.pgm`).
 *
 * Every check fails with ONE message (fail()) naming the file, the byte offset
 * and what was expected: a missing file, a wrong magic number, a width or
 * height of 0 or over PGM_MAX_SIDE (an oversized image, refused before
 * anything is allocated), a bad maxval, a pixel above maxval, pixels missing
 * (a truncated file), or more data after the last pixel than the header
 * announced (a file longer than its header says). */
#ifndef PGM_H
#define PGM_H

#define PGM_MAX_SIDE 8192   /* wider or taller images are refused */

typedef struct {
    int width, height;
    float *pixels;   /* [height, width] row-major, value / maxval in [0, 1] (0 black, 1 white) */
} PgmImage;

/* Returns 0 and fills *img, or -1 with fail() (and *img empty). */
int pgm_read(PgmImage *img, const char *path);
void pgm_free(PgmImage *img);

/* Write pixels [height, width] (values in [0, 1], clamped) as an 8-bit P5
 * file, atomically. Returns 0, or -1 with fail(). */
int pgm_write(const char *path, const float *pixels, int width, int height);

/* Scale in [h, w] to out [out_h, out_w] by area averaging: each output pixel
 * is the mean of the input area it covers (fractional edges weighted by how
 * much of them it covers), so shrinking a photo does not alias, and growing
 * a small image repeats its pixels. */
void image_resize_area(float *out, int out_h, int out_w, const float *in, int h, int w);

#endif
