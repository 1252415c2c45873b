/* main_gpt.c - chapter 06, part 2: a GPT trained on the Brown corpus, beside
 * the counting baselines of Bengio et al. 2003, with sampling and a KV cache.
 *
 *   ./build/06_gpt                                  characters, the quick default (make run-06)
 *   ./build/06_gpt --preset long                    words: the long run of the README
 *   ./build/06_gpt --tokens bpe                     byte-pair-encoded pieces of words, scored in bits per character
 *   ./build/06_gpt --load out/06_gpt/model.ckpt --prompt "The jury said" --temperature 0.8 --top-k 40
 *   ./build/06_gpt --load out/06_gpt/model.ckpt --prompt "The jury said" --plot
 *   ./build/06_gpt --load out/06_gpt/model.ckpt     test perplexity of a saved model
 *
 * The program, top to bottom: flags; the corpus and the counting
 * baselines; the model; (with --load: the saved weights, a prompt
 * continued or the test figure, and stop); training with the one training
 * loop (train/loop.h), a batch of random windows per step; the final
 * figures; samples, and how many of their words occur in the training
 * text; the checkpoint, results.json and the loss curves. Each step is one
 * call of the GPT driver (gpt_run.h); the model is gpt.c (chapter 06's
 * blocks in one causal stack), the experts' report moe_report.c. */
#include <stdio.h>

#include "06_transformer/gpt_run.h"
#include "io/args.h"
#include "util/output.h"

static const GptProgram PROGRAM = {
    .summary = "Chapter 06, part 2: a GPT on the Brown corpus beside unigram and Kneser-Ney trigram models; "
               "sampling with a KV cache.",
    .examples = "./build/06_gpt --tokens bpe\n"
                "./build/06_gpt --load out/06_gpt/model.ckpt --prompt \"The jury said\" --temperature 0.8 --plot",
    .preset_long = "--tokens word --layers 4 --dim 192 --heads 4 --ff 768 --context 64 --batch 32 "
                   "--steps 3000 --lr 1.5e-3 --warmup 200 --dropout 0.2 --attn-dropout 0.1 --weight-decay 0.1",
};

int main(int argc, char **argv) {
    output_guard();
    setvbuf(stdout, NULL, _IOLBF, 0);

    /* 1. Flags: the model's (its defaults here), then the run's (gpt_run.h:
     *    --tokens, --steps, --load, --prompt ...), with the training loop's
     *    defaults (train/loop.h) where the GPT's differ. */
    GptRun run;
    gpt_run_init(&run, &PROGRAM);
    GptModelFlags *m = &run.model;
    *m = (GptModelFlags){.layers = 4, .dim = 128, .heads = 4, .ff = 512, .context = 64, .norm = "pre",
                         .norm_type = "layernorm", .mlp = "gelu", .pos = "learned", .experts = 4, .moe_top_k = 1,
                         .moe_aux = 0.01f, .sparse = "none"};
    const ArgSpec model_flags[] = {
        {"layers", ARG_INT, &m->layers, "blocks L", 1, STACK_MAX_LAYERS, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"dim", ARG_INT, &m->dim, "model width D (a multiple of --heads)", 1, 4096, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"heads", ARG_INT, &m->heads, "attention heads H", 1, 256, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"ff", ARG_INT, &m->ff, "hidden width F of the MLP", 1, 65536, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"context", ARG_INT, &m->context, "positions per window N", 2, 4096, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"norm", ARG_STRING, &m->norm, "where the norms sit", 0, 0, "post,pre", ARG_MODEL, ARG_TRAINING_ONLY},
        {"norm-type", ARG_STRING, &m->norm_type, "which norm", 0, 0, "layernorm,rmsnorm,none,batchnorm",
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"mlp", ARG_STRING, &m->mlp, "the MLP (moe: GELU experts)", 0, 0, "gelu,relu,swiglu,none,moe",
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"experts", ARG_INT, &m->experts, "--mlp moe: experts E, each an MLP of width F", 1, BLOCK_MAX_EXPERTS, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"moe-top-k", ARG_INT, &m->moe_top_k, "--mlp moe: experts per token k (k > 1: weights renormalised)", 1,
         BLOCK_MAX_EXPERTS, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"moe-aux", ARG_FLOAT, &m->moe_aux, "--mlp moe: coefficient of the load-balancing loss", 0, 100, NULL,
         ARG_TRAINING, ARG_TRAINING_ONLY},
        {"capacity", ARG_FLOAT, &m->capacity, "--mlp moe: capacity factor in training (0: no limit)", 0, 1000, NULL,
         ARG_TRAINING, ARG_TRAINING_ONLY},
        {"pos", ARG_STRING, &m->pos, "positions", 0, 0, "learned,sinusoidal,rope", ARG_MODEL, ARG_TRAINING_ONLY},
        {"dropout", ARG_FLOAT, &m->dropout, "dropout on embeddings and sublayer outputs (training only)", 0, 0.95,
         NULL, ARG_TRAINING, ARG_TRAINING_ONLY},
        {"attn-dropout", ARG_FLOAT, &m->attn_dropout, "dropout on the attention weights (training only)", 0, 0.95,
         NULL, ARG_TRAINING, ARG_TRAINING_ONLY},
        {"sparse", ARG_STRING, &m->sparse, "sparse P,w,g,r: blocks of P; w a side, g global, r random",
         0, 0, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
    };
    /* 2,000 steps of 16 windows of 64: about two minutes on two cores. Steps
     * matter more than window length here: 600 steps of windows of 128 (the
     * same time) left the model behind the trigram, barely using its context */
    TrainOptions *t = &run.flags.shared.train;
    t->steps = 2000;
    t->lr = 2e-3f;
    t->warmup = 100;
    t->lr_floor = 0.1f;   /* the cosine decay ends at lr / 10 (the loop's default: lr / 20) */
    t->clip = 1.0f;
    t->weight_decay = 0.1f;
    t->eval_every = 200;
    t->unit = "tokens";
    int rc = gpt_run_parse_flags(&run, argc, argv, model_flags, (int)(sizeof model_flags / sizeof model_flags[0]));

    /* 2. The corpus in the view --tokens names, and the unigram and
     *    Kneser-Ney trigram baselines on its split (with --load: the
     *    checkpoint's config, and the corpus it names, checked). */
    if (rc == 0) rc = gpt_run_load_corpus(&run);

    /* 3. The model, from the flags (with --load, from the checkpoint). */
    if (rc == 0) rc = gpt_run_build(&run);

    /* 4. With --load: the saved weights; --prompt "..." continues the text
     *    (--plot: and draws its attention), else the test figure; then stop. */
    if (rc == 0 && run.flags.shared.load) rc = gpt_run_use_saved(&run);

    /* 5. Training: train_loop over batches of random windows. */
    if (rc == 0) rc = gpt_run_train(&run);

    /* 6. The final figures beside the baselines (--mlp moe: what the
     *    experts did), 7. samples, 8. the checkpoint, results.json, the
     *    loss curves. */
    if (rc == 0) rc = gpt_run_evaluate(&run);
    if (rc == 0) rc = gpt_run_samples(&run);
    if (rc == 0) rc = gpt_run_write_outputs(&run);
    return gpt_run_finish(&run, rc);
}
