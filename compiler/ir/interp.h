/* interp.h — the reference executor of the loop IR (interp.c).
 *
 * Straightforward and obviously correct, not fast: the oracle that generated code is tested
 * against, and `tsrc --run --interp`.  Buffers hold single-precision floats, computed as
 * ir.c's scalar_op_eval() defines; every index is bounds-checked. */
#ifndef TSR_INTERP_H
#define TSR_INTERP_H

#include "ir/ir.h"

typedef struct Interp Interp;
typedef struct tsr_state tsr_state;

/* Build the runtime state from the model image (image.h): allocation and initialisation are the
 * runtime's, as in compiled programs, and so is the reading of the program's command line
 * (argc/argv, argv[0] the name messages show; tsr_main_start()).  NULL after printing an error
 * (out of memory, a data file that cannot be read) or the answer to the command line, with the
 * exit status in *status (0 after --help, 2 for a bad command line, 1 otherwise). */
Interp *interp_new(const IrProgram *ir, const unsigned char *image, size_t image_size, int argc, char **argv,
                   int *status);
void interp_free(Interp *in);
tsr_state *interp_state(Interp *in);

/* Run a function; false after printing a run-time error. */
bool interp_run(Interp *in, const IrFunction *fn);
/* Run the program plan (ir->main); false after printing a run-time error. */
bool interp_run_main(Interp *in);
/* After main has run: what a generated main's end does (the checkpoint of --save PATH); false
 * with the error reported. */
bool interp_finish(Interp *in);

#endif
