/* model_size.c - how big a transformer is: its parameters and the FLOPs of one token, from its
 * configuration, by the formulas chapter 06's code allocates with (gpt_memory_parts for a GPT,
 * block_param_count for a block), for the lecture's size table and for this project's models.
 *
 *   make build/tools/model_size && ./build/tools/model_size     the table (Markdown)
 *   ./build/tools/model_size --gpt L D H N V                      one GPT: L blocks of width D, H heads,
 *                                                                 context N, vocabulary V (F = 4 D)
 *   ./build/tools/model_size --check                              the formula against gpt_create's own
 *                                                                 count for every kind of block the GPT has
 *
 * The counts. A block (pre- or post-norm, LayerNorm, GELU or ReLU, F = 4 D) holds W_QKV [D, 3D],
 * W_O [D, D] and b_O, the MLP's W_1 [D, F], b_1, W_2 [F, D], b_2 and two norms of 2 D:
 * 4 D^2 + 2 D F + 6 D + F = 12 D^2 + 10 D; a decoder block adds its cross-attention and a third
 * norm (4 D^2 + 3 D: 16 D^2 + 13 D). A GPT adds its tied token embeddings V D, learned positions N D
 * and the final norm 2 D; the encoder-decoder of Vaswani et al. one embedding V D, shared by both
 * sides and the output layer, and sinusoidal positions. So L blocks are about 12 L D^2.
 *
 * The FLOPs of one token's forward pass: 2 per weight it multiplies (every block's matrices, and the
 * output layer's V D), plus the attention over a context of N: 2 N D for its scores and 2 N D for the
 * weighted values in each self-attention (and each cross-attention, over a source of N), the usual
 * accounting (Kaplan et al. 2020). Training costs about 3 times that (the backward pass twice the
 * forward). Biases, norms and softmax are left out (a few per thousand). Attention's share of the
 * forward: 4 N D a layer against 24 D^2 for the weights, so it passes half only past N = 6 D. */
#include "06_transformer/block.h"
#include "06_transformer/gpt.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A pre-norm GELU GPT block of width D, H heads, F = 4 D (the project's default block). */
static GptConfig gpt_config(int L, int D, int H, int N, int V) {
    return (GptConfig){.layers = L,
                       .block = {.D = D, .H = H, .F = 4 * D, .norm_place = BLOCK_PRE_NORM, .norm = BLOCK_LAYERNORM,
                                 .mlp = BLOCK_MLP_GELU, .attention = MULTI_HEAD_PLAIN},
                       .pos = POSITIONS_LEARNED, .context = N, .V = V};
}

/* The GPT's parameters, as gpt_create counts them (gpt_memory_parts: 2 x P floats untrained). */
static int gpt_params(const GptConfig *c, double *P) {
    MemoryPart parts[GPT_MEMORY_PARTS];
    if (gpt_memory_parts(c, 1, 0, parts) < 0) return -1;
    *P = parts[0].bytes / (2.0 * sizeof(float));
    return 0;
}

/* Forward FLOPs of one token: 2 per multiplied weight (the blocks' matrices and the output layer). */
static double gpt_flops(const GptConfig *c) {
    const double D = c->block.D, F = c->block.F, N = c->context, L = c->layers;
    return L * (2.0 * (4 * D * D + 2 * D * F) + 4.0 * N * D) + 2.0 * c->V * D;
}

/* Vaswani et al.'s encoder-decoder: L_e encoder and L_d decoder post-norm ReLU blocks, one shared,
 * tied embedding of V rows, sinusoidal positions. */
static double encdec_params(int L_e, int L_d, int D, int H, int F, int V) {
    BlockSpec enc = {.D = D, .H = H, .D_H = D / H, .F = F, .norm_place = BLOCK_POST_NORM, .norm = BLOCK_LAYERNORM,
                     .mlp = BLOCK_MLP_RELU, .attention = MULTI_HEAD_PLAIN};
    BlockSpec dec = enc;
    dec.causal = 1;
    dec.cross = 1;
    return (double)V * D + L_e * (double)block_param_count(&enc) + L_d * (double)block_param_count(&dec);
}

static double encdec_flops(int L_e, int L_d, int D, int F, int N, int V) {
    const double d = D, f = F, n = N;
    /* per source token through the encoder, and per target token through the decoder (self and cross) */
    return L_e * (2.0 * (4 * d * d + 2 * d * f) + 4.0 * n * d) +
           L_d * (2.0 * (8 * d * d + 2 * d * f) + 8.0 * n * d) + 2.0 * V * d;
}

static const char *amount(double x, char *buf, size_t cap) {   /* 811,008; 214.2M; 1.56B; 1.08T */
    if (x >= 1e12) snprintf(buf, cap, "%.2fT", x / 1e12);
    else if (x >= 1e9) snprintf(buf, cap, "%.2fB", x / 1e9);
    else if (x >= 1e6) snprintf(buf, cap, "%.1fM", x / 1e6);
    else snprintf(buf, cap, "%d,%03d", (int)(x / 1000), (int)x % 1000);
    return buf;
}

/* One line of the table; attention: the forward FLOPs of the attention over the context (of flops). */
static void row(const char *name, const char *config, const char *lecture, double P, double flops,
                double attention) {
    char p[32], f[32], t[32];
    printf("| %s | %s | %s | %s | %s | %s | %.1f%% |\n", name, config, lecture, amount(P, p, sizeof p),
           amount(flops, f, sizeof f), amount(3.0 * flops, t, sizeof t), 100.0 * attention / flops);
}

static int gpt_row(const char *name, const char *lecture, int L, int D, int H, int N, int V) {
    const GptConfig c = gpt_config(L, D, H, N, V);
    double P;
    if (gpt_params(&c, &P) < 0) return -1;
    char config[128];
    snprintf(config, sizeof config, "GPT, L %d, D %d, H %d, N %d, V %d", L, D, H, N, V);
    row(name, config, lecture, P, gpt_flops(&c), 4.0 * L * N * D);
    return 0;
}

static int table(void) {
    printf("| model | configuration (F = 4 D) | the lecture's count | parameters | forward FLOPs a token | "
           "training FLOPs a token | attention's share |\n|---|---|---|---|---|---|---|\n");
    row("Transformer (big), Vaswani et al. 2017", "encoder-decoder, 6 + 6 blocks, D 1024, H 16, N 512, V 37000",
        "213M", encdec_params(6, 6, 1024, 16, 4096, 37000), encdec_flops(6, 6, 1024, 4096, 512, 37000),
        (6 * 4.0 + 6 * 8.0) * 512 * 1024);
    if (gpt_row("GPT-2 (XL)", "1.5B", 48, 1600, 25, 1024, 50257) < 0 ||
        gpt_row("GPT-3", "175B", 96, 12288, 96, 2048, 50257) < 0 ||
        gpt_row("chapter 06's GPT, quick default (characters)", "-", 4, 128, 4, 64, 86) < 0)
        return -1;
    return 0;
}

/* The formula against the count of a GPT gpt_create builds, for every kind of block it can have. */
static int check(void) {
    int bad = 0;
    for (int k = 0; k < 8; k++) {
        GptConfig c = gpt_config(1 + k % 3, 16 * (1 + k % 2), 2, 8 + k, 20 + k);
        c.block.norm_place = k % 2 ? BLOCK_POST_NORM : BLOCK_PRE_NORM;
        c.block.norm = (BlockNorm)(k % 3);                     /* LayerNorm, RMSNorm, none */
        c.block.mlp = (BlockMlp)(k % 4);                       /* GELU, ReLU, SwiGLU, none */
        c.block.F = 24 + 8 * k;
        c.pos = k % 3 == 0 ? POSITIONS_LEARNED : k % 3 == 1 ? POSITIONS_SINUSOIDAL : POSITIONS_ROPE;
        if (k == 7) {                                           /* a mixture of 3 GELU experts */
            c.block.mlp = BLOCK_MLP_GELU;
            c.block.moe = (BlockMoe){.E = 3, .k = 2};
        }
        double P;
        Gpt g;
        if (gpt_params(&c, &P) < 0 || gpt_create(&g, &c, 1, 1) < 0) {
            fprintf(stderr, "model_size --check: config %d: %s\n", k, last_error());
            return 1;
        }
        const int same = (double)g.params.size == P;
        printf("config %d: L %d, D %d, F %d, norm %d, mlp %d, pos %s%s: formula %.0f, gpt_create %zu: %s\n", k,
               c.layers, c.block.D, c.block.F, (int)c.block.norm, (int)c.block.mlp, positions_name(c.pos),
               k == 7 ? ", 3 experts" : "", P, g.params.size, same ? "same" : "DIFFERENT");
        bad += !same;
        gpt_free(&g);
    }
    return bad ? 1 : 0;
}

static int usage(const char *why) {
    fprintf(stderr, "model_size: %s\nusage: model_size [--check | --gpt L D H N V]\n", why);
    return 2;
}

int main(int argc, char **argv) {
    if (argc == 1) return table() < 0 ? (fprintf(stderr, "model_size: %s\n", last_error()), 1) : 0;
    if (strcmp(argv[1], "--check") == 0 && argc == 2) return check();
    if (strcmp(argv[1], "--help") == 0 && argc == 2) {
        printf("usage: model_size [--check | --gpt L D H N V]\n(see the header of tools/model_size.c)\n");
        return 0;
    }
    if (strcmp(argv[1], "--gpt") != 0 || argc != 7) return usage("expected --check, --gpt L D H N V, or nothing");
    int v[5];
    const char *names[5] = {"L", "D", "H", "N", "V"};
    for (int i = 0; i < 5; i++) {
        char *end;
        const long x = strtol(argv[2 + i], &end, 10);
        if (*argv[2 + i] == '\0' || *end != '\0' || x < 1 || x > 1000000) {
            char why[96];
            snprintf(why, sizeof why, "--gpt: %s = '%s': expected a whole number from 1 to 1000000", names[i],
                     argv[2 + i]);
            return usage(why);
        }
        v[i] = (int)x;
    }
    if (v[1] % v[2] != 0) return usage("--gpt: D must be a multiple of H (each head gets D / H)");
    printf("| model | configuration (F = 4 D) | the lecture's count | parameters | forward FLOPs a token | "
           "training FLOPs a token | attention's share |\n|---|---|---|---|---|---|---|\n");
    if (gpt_row("GPT", "-", v[0], v[1], v[2], v[3], v[4]) < 0) {
        fprintf(stderr, "model_size: %s\n", last_error());
        return 1;
    }
    return 0;
}
