/* cg_approx.h — tsrc's own exp, log and tanh emitted as LLVM instructions (cg_approx.c), the
 * same sequence as compiler/ir/approx.c.  Each takes and returns a float or a vector of
 * g->lanes floats. */
#ifndef TSR_CG_APPROX_H
#define TSR_CG_APPROX_H

#include "cg/cg_llvm.h"

LLVMValueRef cga_exp(CgLlvm *g, LLVMValueRef x);
LLVMValueRef cga_log(CgLlvm *g, LLVMValueRef x);
LLVMValueRef cga_tanh(CgLlvm *g, LLVMValueRef x);

#endif
