/* norm_experiment.h - chapter 06: post-LN against pre-LN as the stack gets
 * deeper, trained WITHOUT a learning-rate warm-up.
 *
 * Xiong et al. 2020 ("On Layer Normalization in the Transformer
 * Architecture") show that in a post-LN stack the gradients of the last
 * layers are large at initialisation, so a full learning rate from step 0
 * can derail training unless it is warmed up; pre-LN keeps an identity path
 * through every block and trains without the warm-up. Here: the dates task,
 * depth 2, 6 and 12 (encoder and decoder), both placements, the same seed,
 * batch and constant learning rate from step 0; the training loss of each
 * run in one plot, and a table of where each run ended. */
#ifndef NORM_EXPERIMENT_H
#define NORM_EXPERIMENT_H

/* Prints the table and writes out_dir/norm_experiment.{dat,gp,png} and
 * out_dir/norm_experiment.json. Returns 0 or -1 with fail(). */
int norm_experiment_run(const char *out_dir);

#endif
