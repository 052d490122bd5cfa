/* grads: how backward hands finished gradients to whoever reduces them,
 * the contract between model (which fills the flat gradient buffer) and
 * comm (which reduces it bucket by bucket while backward continues).
 *
 * The order in which ranges become final is a property of the producer's
 * buffer layout, stated once by the producer (cz_model_grad_order) and read
 * by the consumer's scheduler (cz_grad_sync_create): the bucket that is
 * complete first is reduced first. */
#ifndef CLOZE_GRADS_H
#define CLOZE_GRADS_H

#include <stddef.h>
#include <stdint.h>

/* [offset, offset + count) of the gradient buffer is final on this rank. */
typedef void (*cz_grad_ready_fn)(void *ctx, size_t offset, size_t count);

/* Gradient rows that backward hands over apart instead of adding them to
 * the buffer: rows[i] (ascending, distinct) of a [*, width] tensor at
 * `offset` gets vals[i * width .. + width) added to whatever the buffer
 * holds there once reduced. For the word embedding's lookup: only the rows
 * of the batch's tokens, final at the very end of backward, while the rest
 * of the tensor's gradient is final early and can be reduced first.
 * `height` is the tensor's row count. Pointers valid until the next
 * backward. */
typedef struct cz_grad_rows {
    size_t offset, width, height, n;
    const int32_t *rows;
    const float *vals;
} cz_grad_rows;
typedef void (*cz_grad_rows_fn)(void *ctx, const cz_grad_rows *r);

typedef enum {
    CZ_GRAD_ASCENDING = 0, /* ranges become final from offset 0 upwards */
    CZ_GRAD_DESCENDING = 1 /* from the end of the buffer downwards */
} cz_grad_order;

#endif
