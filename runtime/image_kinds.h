/* image_kinds.h — the kind tables of the model image, one source for its writer and reader.
 *
 * The compiler's loop IR (compiler/ir.h: BufferKind, InitKind, IrPrintArgKind) and the
 * runtime's image reader (internal.h: TSR_BUF_*, TSR_INIT_*, TSR_ARG_*) both expand these
 * lists, so a kind's number in the image is its position here on both sides.  Append only:
 * reordering changes the image format (TSR_IMAGE_VERSION). */
#ifndef TSR_IMAGE_KINDS_H
#define TSR_IMAGE_KINDS_H

/* What a buffer holds and who fills it. */
#define TSR_BUFFER_KINDS(X)                                                        \
    X(LITERAL)  /* values written in the program (init: values) */                \
    X(PARAM)    /* a parameter (init: fill value, values, seeded uniform or normal) */\
    X(CONSTANT) /* every cell the same value (`ones ()`, scalars): init fill */   \
    X(INPUT)    /* filled by the caller */                                         \
    X(DATA)     /* filled from a data source */                                    \
    X(COMPUTED) /* written by the program's code */                              \
    X(SCRATCH)  /* the schedule's working storage (packed panels, tiles): not observable */

/* How a buffer is initialised when a state is created. */
/* UNIFORM: shift + scale * u, u uniform in [-1, 1); NORMAL: shift + scale * n, n standard normal
 * (scale is the image's `fill`, shift its `shift`). */
#define TSR_INIT_KINDS(X) X(NONE) X(FILL) X(VALUES) X(UNIFORM) X(NORMAL)

/* The arguments of a print statement. */
#define TSR_ARG_KINDS(X) X(INT) X(FLOAT) X(SYMBOL) X(BUFFER) X(OPTION)

/* The statements of `main` that the runtime carries out (besides print): checkpoints, shuffles,
 * recorded series and their plots, and the progress bar of a loop. */
#define TSR_ACTION_KINDS(X) X(SAVE) X(LOAD) X(SHUFFLE) X(RECORD) X(PLOT) X(PROGRESS)

#endif
