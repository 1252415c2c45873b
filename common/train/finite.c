/* finite.c - find the first non-finite gradient or loss of a training step (see finite.h). */
#include "train/finite.h"

#include <math.h>
#include <stddef.h>

#include "util/error.h"

int grads_check_finite(const Params *p, double loss) {
    /* One pass over the whole gradient buffer: cheap next to the step that filled it. */
    size_t bad = p->size;
    for (size_t i = 0; i < p->size; i++)
        if (!isfinite(p->grad[i])) {
            bad = i;
            break;
        }
    if (bad == p->size && isfinite(loss)) return 0;
    if (bad == p->size) return fail("the loss is %g while every gradient is finite", loss);
    for (int t = 0; t < p->n_tensors; t++) {
        const ParamTensor *pt = &p->tensors[t];
        if (bad >= pt->offset && bad < pt->offset + pt->count)
            return fail("the gradient of '%s' (tensor %d of %d) is %g at element %zu (loss %g)", pt->name,
                        t + 1, p->n_tensors, (double)p->grad[bad], bad - pt->offset, loss);
    }
    return fail("gradient element %zu is %g (loss %g)", bad, (double)p->grad[bad], loss);
}
