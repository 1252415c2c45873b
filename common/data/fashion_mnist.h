/* fashion_mnist.h - the Fashion-MNIST data set (chapter 07, the Vision Transformer).
 *
 * 70,000 grey images of 28 x 28 pixels of Zalando's clothing articles, one of
 * ten classes each (Xiao, Rasul and Vollgraf 2017, github.com/zalandoresearch/
 * fashion-mnist; MIT licence). Debian ships it as the package
 * dataset-fashion-mnist (tools/deps.sh installs it), four gzip'd IDX files
 * (data/idx.h) in FASHION_MNIST_DIR:
 *
 *   train-images-idx3-ubyte.gz   60,000 images     train-labels-idx1-ubyte.gz
 *   t10k-images-idx3-ubyte.gz    10,000 images     t10k-labels-idx1-ubyte.gz
 *
 * The splits (data/README.md has the measured figures):
 *   train  the first 55,000 images of the training file;
 *   valid  its LAST 5,000 images (FASHION_MNIST_N_VALID), held out to watch
 *          training and choose settings: never trained on;
 *   test   the official 10,000 test images, for the final figure only.
 * The order is the files' own: the loader does not shuffle (the training loop
 * draws its batches at random).
 *
 * Pixels become floats x = pixel / 255 in [0, 1]: 0 is the (black) background,
 * 1 full ink. With normalize = 1 they are then standardised with the mean and
 * standard deviation of the TRAINING split's pixels (all 55,000 x 784 of them,
 * one mean and one std for every pixel position, as torchvision's
 * transforms.Normalize((mean,), (std,)) does): x = (pixel / 255 - mean) / std,
 * so the training pixels have mean 0 and variance 1, and a blank pixel becomes
 * -mean / std (FashionMnist.background). The validation and test images use the
 * same training mean and std: statistics of held-out data must not leak in. */
#ifndef FASHION_MNIST_H
#define FASHION_MNIST_H
#include "data/examples.h"
#include "util/rng.h"

/* Where the Debian package puts the files; a program's --data DIR overrides it. */
#define FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

#define FASHION_MNIST_ROWS 28
#define FASHION_MNIST_COLS 28
#define FASHION_MNIST_PIXELS (FASHION_MNIST_ROWS * FASHION_MNIST_COLS)   /* 784 */
#define FASHION_MNIST_CLASSES 10
/* The last this-many images of the training file are the validation split. */
#define FASHION_MNIST_N_VALID 5000

/* The ten class names, indexed by label 0..9:
 * "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
 * "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot". */
extern const char *const fashion_mnist_class_names[FASHION_MNIST_CLASSES];

/* One split: n images and their labels. */
typedef struct {
    int n;
    float *images;   /* [n, 28, 28] row-major: image i starts at images + i * FASHION_MNIST_PIXELS */
    int *labels;     /* [n], each 0..9 */
} ImageSplit;

typedef struct {
    ImageSplit train, valid, test;   /* 55,000 / 5,000 / 10,000 with the Debian files */
    float mean, std;     /* of the training split's pixel / 255 values (population std) */
    int normalized;      /* 1: images hold (pixel / 255 - mean) / std; 0: pixel / 255 */
    float background;    /* the value of a blank (0) pixel: 0, or -mean / std when normalized */
    float ink;           /* the value of a full (255) pixel: 1, or (1 - mean) / std when normalized */
} FashionMnist;

/* Load the four files from dir (NULL or "" = FASHION_MNIST_DIR). Each name is
 * tried with ".gz" first, then without (a gunzip'd copy). Checks, each with one
 * fail() message naming the file: what idx.h checks, images of 28 x 28, as many
 * labels as images, labels 0..9, and more than FASHION_MNIST_N_VALID training
 * images. normalize: 0 or 1, as above. Returns 0, or -1 with fail() (and *d
 * left empty). Takes about 220 MB (70,000 x 784 floats). */
int fashion_mnist_load(FashionMnist *d, const char *dir, int normalize);

/* Free the images and labels (train and valid share one buffer) and zero *d. */
void fashion_mnist_free(FashionMnist *d);

/* Augmentation for training: one image [28, 28] -> out [28, 28] (out != image).
 *   - a random shift by (dy, dx), each uniform in -max_shift..max_shift pixels:
 *     pixels moved past the edge are dropped, uncovered ones get `background`
 *     (zero padding: 0, or FashionMnist.background for normalised images);
 *   - when flip is 1, a horizontal mirror (left <-> right) with probability 1/2.
 * out[r][c] = image[r - dy][c'] with c' = c - dx, mirrored to 27 - c' when
 * flipped. The random numbers come from rng, in the order dy, dx, flip (the flip
 * is drawn only when flip is 1), so the same seed gives the same images.
 * max_shift 0 and flip 0 copy the image. 0 <= max_shift < 28. */
void fashion_mnist_augment(float *out, const float *image, int max_shift, int flip, float background, Rng *rng);

/* Random erasing (Zhong, Zheng, Kang, Li and Yang 2020), in place on one image
 * [28, 28]: with probability p, a rectangle of the image is replaced by noise,
 * so the model cannot lean on any one part of the article. The rectangle's area
 * is a uniform fraction 0.02..0.4 of the image and its aspect ratio h / w is
 * log-uniform in 0.3..3.3 (the paper's settings); h = round(sqrt(area * ratio)),
 * w = round(sqrt(area / ratio)), redrawn (at most 10 times, then no erasing)
 * until it fits, and placed uniformly. Each of its pixels gets a value uniform in
 * [lo, hi) (the range of the pixels: lo = background, hi = full ink). The
 * random numbers come from rng: one for the coin, area and ratio per attempt,
 * top and left for the one that fits, then one per erased pixel. p = 0 draws nothing. 0 <= p <= 1. */
void fashion_mnist_erase(float *image, float p, float lo, float hi, Rng *rng);

/* The data set as an ExampleTask (data/examples.h) for the per-example
 * driver (train/classifier.h): n_in = 784 floats, n_out = 1, C = 10.
 *   train_batch  B images drawn at random (with replacement) from the train
 *                split (its first train_size images when train_size > 0),
 *                augmented when max_shift > 0 or flip is 1, then erased
 *                (fashion_mnist_erase) with probability erase;
 *   test_batch   the next B images of the evaluation split, in order (it
 *                wraps around); test_reset starts it again;
 *   parse_input  refuses: images come from a file or an index, which the
 *                chapter reads itself (--image, --index).
 * eval is the test split unless eval_valid is 1 (the validation split). */
typedef struct {
    const FashionMnist *d;
    int max_shift, flip;   /* augmentation of the training images */
    float erase;           /* probability of random erasing after the shift and flip (0: none) */
    int train_size;        /* train on the first this-many training images only (0: all 55,000) */
    int eval_valid;        /* 1: test_batch reads the validation split */
    int cursor;            /* the next evaluation image */
} FashionMnistTask;

/* Fill t (self = ft) from ft, whose d must outlive t. */
void fashion_mnist_task(FashionMnistTask *ft, ExampleTask *t);

/* How many training images train_batch draws from: ft->train_size, or the
 * whole train split when it is 0. The split's order is the file's, already
 * mixed: the first 1,000 images hold 86 to 115 of each class (data/README.md).
 * Returns the number, or -1 with fail() when train_size is negative or more
 * than the split holds. */
int fashion_mnist_train_size(const FashionMnistTask *ft);

#endif
