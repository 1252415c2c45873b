/* pictures.h - chapter 07: what a trained ViT shows, and using a saved one.
 *
 * After each training run (the driver's trained hook):
 *   - the validation accuracy (the 5,000 held-out training images);
 *   - a grid of test images with predicted and true labels;
 *   - the class token's attention of every layer over the image, and the
 *     attention rollout through the layers (Abnar and Zuidema 2020);
 *   - the cosine similarity of each patch's learned position embedding with
 *     every other patch's (the ViT paper's figure 7);
 *   - the confusion matrix of the test set, with class names;
 *   - one row of the patch-size table (step time, attention memory, accuracy).
 * With --load: the top 3 classes of one image (a PGM file or a test image)
 * and where the model looked. Everything goes into the directory out. */
#ifndef VIT_PICTURES_H
#define VIT_PICTURES_H
#include "07_vision_transformer/vit.h"
#include "data/fashion_mnist.h"
#include "io/results.h"
#include "model/classifier.h"

/* Everything after the training of run key (label: titles); steps, batch
 * and seconds: the run's budget and training time, for the patch table
 * (steps 0: a loaded model, no row). v is the model behind m, t its task over
 * d (a FashionMnistTask: when its training flipped images, the accuracies
 * with each image averaged with its mirror are printed and kept too);
 * n_pictures test images in the attention picture (0: no pictures, only
 * the accuracies); res (may be NULL) gets the accuracies. Returns 0 or -1
 * with fail(). */
int vit_pictures_after_training(const char *out, const char *key, const char *label, int steps, int batch,
                                double seconds, Vit *v, Classifier *m, const ExampleTask *t, const FashionMnist *d,
                                int n_pictures, Results *res);

/* Print the patch-size table of the runs so far (nothing with one run) and
 * write it to out/patch_table.md. Returns 0 or -1 with fail(). */
int vit_patch_table_print(const char *out);

/* The top 3 classes of one image and where v looked, drawn into out:
 * image_path (a PGM file) when not NULL, else test image index of d.
 * Returns 0 or -1 with fail(). */
int vit_classify_one(const char *out, Vit *v, const FashionMnist *d, const char *image_path, int index);

#endif
