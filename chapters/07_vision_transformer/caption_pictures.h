/* caption_pictures.h - chapter 07, captioning: where the captioner looked for
 * each word, drawn as Show, Attend and Tell draws it: the scene, then one
 * panel per generated word (and <eos>) with that step's attention weights
 * over the grid of patches, upsampled to the image and laid over it.
 *
 * For model 2 the map is a_t, chapter 02's additive attention; for model 3
 * the last decoder block's cross-attention of the word's position, the mean
 * of its heads, and a second picture, stem_heads.png, with a row per decoder
 * layer and head; model 1 has no map, its picture is the scene and the
 * caption. */
#ifndef CAPTION_PICTURES_H
#define CAPTION_PICTURES_H
#include "07_vision_transformer/scene.h"
#include "data/dataset.h"
#include "model/seq2seq.h"

/* Ink [side, side] in [0, 1] (white on black, as the data set draws its items)
 * from an image in the data set's scale: x std + mean when normalized. */
void caption_ink(float *ink, const float *image, int side, int normalized, float mean, float std);

/* map [g, g] (g = side / P) -> up [side, side], bilinear between patch
 * centres (a pixel beyond the outermost centres takes the edge value). */
void caption_upsample(float *up, const float *map, int g, int side);

/* Caption image [side, side] (the data set's scale) with m, greedy, print
 * "label: caption", and draw the panels into stem.png (.dat, .gp); words is
 * the data set's target vocabulary. truth (may be NULL) goes in the title.
 * P: the patch side (the grid is side / P per side). Returns 0 or -1 with fail(). */
int caption_draw_one(Seq2Seq *m, const Dataset *d, const float *image, int side, int P, int normalized, float mean,
                     float std, const char *stem, const char *label, const char *truth);

/* After the evaluation: test scenes 0..n-1 of d captioned by the captioner
 * m (a Caption, caption.h), each into out_dir/caption_test<i>.png with its
 * true caption in the title; scale: the data set's (scene.h). Returns 0 or
 * -1 with fail(). */
int caption_draw_test_scenes(Seq2Seq *m, const Dataset *d, int n, const SceneScale *scale, const char *out_dir);

/* --load CKPT --image FILE: the user's PGM scene (light items on black,
 * scaled to the model's side when it is another size, then to the data
 * set's scale) captioned by m into out_dir/caption_<file name>.png.
 * Returns 0 or -1 with fail(). */
int caption_draw_file(Seq2Seq *m, const Dataset *d, const char *path, const SceneScale *scale, const char *out_dir);

#endif
