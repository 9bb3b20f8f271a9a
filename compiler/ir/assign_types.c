/* assign_types.c — the element types of the assignments (docs/language.md §3.9): the assignment
 * stage's second inference, beside the shapes'.
 *
 * Inputs, data items and parameters declare their element type (f32 unless written), literals
 * are f32, and an operation's result takes the type of what its forward code stores.  Numbers:
 * an operation of f32 and f64 values computes in f64 (the f32 ones widened, exactly), and storing
 * an f64 value where an f32 is kept is an error that names the cast, except into a gradient,
 * which keeps its tensor's type (the gradient that an f64 use of an f32 tensor sends back is
 * rounded there, as PyTorch's `.double()` does).  A number written among values takes their
 * type.  An i32 value may be copied (a slice, a stack, `v =: v1`), converted (`to_f32`, `to_f64`,
 * `to_i32`), used as positions (a gathered axis, docs/language.md §5.11), computed on by the
 * operations that have an i32 form (scalar_op_integer: + - * / mod …, with whole numbers) and
 * accumulated with =+ =- =* and the max and min accumulations; any other arithmetic on it,
 * mixing it with numbers, or storing it where a number is kept is an error that names the cast.
 * u8 and bool are integer storage types computed as i32 (C's integer promotion): a read of one
 * is an i32 value in 0..255 (0 or 1), any arithmetic on it gives i32, bool widens into u8 and both
 * into i32 implicitly, and storing wider integers into them needs to_u8 (the low 8 bits) or
 * to_bool (not 0), which become i32 operations here.  `where` with an integer condition and
 * number branches (or the reverse, or two numbers written, one with a fraction) tests the
 * condition against 0 in its own type.
 *
 * assign.c calls check_rhs_dtype() on every assignment it makes, with the type its left side
 * keeps; the helpers declared in assign_build.h serve its stacks and copies too.
 *
 * Requires: the assignment's reads and the tensors' declared element types. */
#include "ir/assign_build.h"

#include <math.h>
#include <string.h>

#include "base/diag.h"
#include "runtime/tsr.h"


const char *dtype_word(uint8_t dtype) { return dtype == DTYPE_ANY ? "number" : ir_dtype_word(dtype); }

static bool is_float_dtype(uint8_t dtype) {
    return dtype == TSR_DTYPE_F32 || dtype == TSR_DTYPE_F64 || dtype == TSR_DTYPE_BF16 || dtype == TSR_DTYPE_F16;
}

bool is_half_dtype(uint8_t dtype) { return dtype == TSR_DTYPE_BF16 || dtype == TSR_DTYPE_F16; }

bool is_int_dtype(uint8_t dtype) { return dtype != DTYPE_ANY && tsr_dtype_integer(dtype); }

/* The wider of two integer types (bool within u8 within i32 within i64), or the other where one
 * is a constant (DTYPE_ANY). */
uint8_t int_join(uint8_t a, uint8_t b) {
    if (a == DTYPE_ANY || a == b) return b;
    if (b == DTYPE_ANY) return a;
    if (a == TSR_DTYPE_I64 || b == TSR_DTYPE_I64) return TSR_DTYPE_I64;
    if (a == TSR_DTYPE_I32 || b == TSR_DTYPE_I32) return TSR_DTYPE_I32;
    return TSR_DTYPE_U8;
}

/* The type an operation on values of number types a and b gives (DTYPE_ANY: a constant, which
 * takes the other's type): f64 over everything, a type with itself, f32 otherwise (bf16 with
 * f32, and bf16 with f16, whose ranges and precisions neither holds of the other). */
uint8_t float_join(uint8_t a, uint8_t b) {
    if (a == DTYPE_ANY || a == b) return b;
    if (b == DTYPE_ANY) return a;
    if (a == TSR_DTYPE_F64 || b == TSR_DTYPE_F64) return TSR_DTYPE_F64;
    return TSR_DTYPE_F32;
}

/* Whether a value of type `from` is exactly a value of type `to` (a widening): f32 and the half
 * types into f64, the half types into f32, bool into u8, both into i32, all three into i64. */
static bool widens(uint8_t from, uint8_t to) {
    if (is_int_dtype(from) && is_int_dtype(to)) return int_join(from, to) == to;
    return (to == TSR_DTYPE_F64 && (from == TSR_DTYPE_F32 || is_half_dtype(from))) || (to == TSR_DTYPE_F32 && is_half_dtype(from));
}

/* The conversion operation to `to` (TSR_DTYPE_*). */
static ScalarOp conversion_to(uint8_t to) {
    return to == TSR_DTYPE_F64 ? SOP_TO_F64 : to == TSR_DTYPE_I32 ? SOP_TO_I32 : to == TSR_DTYPE_BF16 ? SOP_TO_BF16
         : to == TSR_DTYPE_F16 ? SOP_TO_F16 : to == TSR_DTYPE_I64 ? SOP_TO_I64 : SOP_TO_F32;
}

const char *node_text(Builder *b, TNode node) {
    const Tensor *t = node.tensor;
    const char *name = t->shown ? t->shown : t->name ? t->name : NULL;
    if (name) return arena_printf(b->ir->arena, "'%s%s'", name, node.grad ? ".grad" : "");
    return arena_printf(b->ir->arena, "the result of '%s'%s", t->kind == TENSOR_OP ? t->op_name : "?", node.grad ? " (its gradient)" : "");
}

/* The element type of a tensor node: a gradient's is its tensor's. */
uint8_t node_dtype(TNode node) { return node.tensor->dtype; }

/* The value of t when it is a number: a one-cell literal or constant, or an arithmetic operation
 * between numbers written in a tensor expression (`vocab - 1`, `1. /. 3.`, `sqrt (dim k)`: + - * /
 * **, neg, sqrt, log and exp, through at most 16 levels), computed in double (attention's 1/sqrt(head_dim)
 * among f64 scores was the f32 square root).  Such an operation is a tensor of its own, computed in
 * f32 where f32 values read it; one bound to a name is not taken here, as code may write it. */
static bool number_value(const Tensor *t, int depth, double *value) {
    if (t->kind == TENSOR_LITERAL || t->kind == TENSOR_CONSTANT) {
        if (t->value_count != 1 || t->iota || !t->values) return false;
        *value = t->values[0];
        return true;
    }
    if (t->kind != TENSOR_OP || t->name || t->shown || depth > 16 || !t->op_name) return false;
    const char *op = t->op_name;
    double x, y = 0;
    if (t->operand_count == 1 && strcmp(op, "neg") == 0 && number_value(t->operands[0], depth + 1, &x)) {
        *value = -x;
        return true;
    }
    if (t->operand_count == 1 && number_value(t->operands[0], depth + 1, &x)) {
        if (strcmp(op, "sqrt") == 0) *value = sqrt(x);
        else if (strcmp(op, "log") == 0) *value = log(x);
        else if (strcmp(op, "exp") == 0) *value = exp(x);
        else return false;
        return true;
    }
    if (t->operand_count != 2 || !number_value(t->operands[0], depth + 1, &x) || !number_value(t->operands[1], depth + 1, &y))
        return false;
    if (strcmp(op, "+") == 0) *value = x + y;
    else if (strcmp(op, "-") == 0) *value = x - y;
    else if (strcmp(op, "*.") == 0 || strcmp(op, "*") == 0) *value = x * y;
    else if (strcmp(op, "/.") == 0) *value = x / y;
    else if (strcmp(op, "**") == 0) *value = pow(x, y);
    else return false;
    return true;
}

/* A number in a tensor expression (`ids + 1`: a one-cell literal, a constant such as `ones ()`,
 * an operation between numbers) read by e: its value, which takes the other operands' type (as
 * a double among f64 values, an integer among integers; among f32 ones the read stays, of the
 * literal's nearest f32 or the operation's f32 result). */
static bool read_number(const Assignment *a, const AExpr *e, double *value) {
    if (e->kind != AE_READ || a->reads[e->read].node.grad) return false;
    return number_value(a->reads[e->read].node.tensor, 0, value);
}

/* Whether f32 or a half type rounds the finite `value` to infinity (f16 from 65520 on, bf16 and
 * f32 near f32's largest): a number written for it (an initial value, a literal, an option's
 * default) that it cannot hold. */
bool overflows_type(double value, uint8_t dtype) {
    if (!isfinite(value) || (dtype != TSR_DTYPE_F16 && dtype != TSR_DTYPE_BF16 && dtype != TSR_DTYPE_F32)) return false;
    float held = dtype == TSR_DTYPE_F16 ? tsr_f16_to_f32(tsr_f64_to_f16(value))
               : dtype == TSR_DTYPE_BF16 ? tsr_bf16_to_f32(tsr_f64_to_bf16(value)) : (float)value;
    return isinf(held);
}

/* The option e reads (elab/builtins.c option_tensor: one f64 cell), or NULL.  Such a read is typed
 * by the values it meets as a written number is: the double, the nearest f32, the integer. */
static ProgramOption *option_read(Builder *b, const Assignment *a, const AExpr *e) {
    if (e->kind != AE_READ || a->reads[e->read].node.grad) return NULL;
    const Tensor *t = a->reads[e->read].node.tensor;
    if (t->kind != TENSOR_DATA || !t->source || strcmp(t->source->generator, "option") != 0) return NULL;
    return &b->program->options[t->source->option];
}

/* Option o read among values of `type` (f32 or i32: narrower than its f64): marked so (the
 * runtime refuses a value set on the command line that the type cannot hold, docs/cli.md), and
 * its default checked; false after an error. */
static bool option_among(Builder *b, const Assignment *a, ProgramOption *o, uint8_t type) {
    bool f32 = type == TSR_DTYPE_F32, i32 = type == TSR_DTYPE_I32;
    o->among |= f32 ? TSR_OPTION_AMONG_F32 : i32 ? TSR_OPTION_AMONG_I32 : 0;
    if ((f32 && overflows_type(o->value, TSR_DTYPE_F32)) || (i32 && (o->value < -0x1p31 || o->value >= 0x1p31))) {
        char shown[64];
        snprintf(shown, sizeof shown, o->is_float ? "%g" : "%.0f", o->value);
        diag_error(a->span, "%s computes on %s values with the option '%s', whose default %s is beyond %s's range",
                   a->what, ir_dtype_word(type), o->name, shown, ir_dtype_word(type));
        diag_note(o->span, "the option '%s' is declared here", o->name);
        b->failed = true;
        return false;
    }
    return true;
}

/* The option reads of e (numbers alone) among values computed as `type`: converted from f64. */
static void options_as(Builder *b, const Assignment *a, AExpr *e, uint8_t type) {
    ProgramOption *o = option_read(b, a, e);
    if (o) {
        if (option_among(b, a, o, type)) convert_in_place(b, e, type);
    } else if (e->kind == AE_OP) {
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) options_as(b, a, e->args[i], type);
    }
}

/* Constants (and operations on constants alone) met by integer arithmetic of type `type` (i32
 * or i64) become integers of it: whole numbers that fit; an integer option's read is converted to
 * it, and a number option's is an error.  False after an error. */
static bool constants_to_int(Builder *b, const Assignment *a, AExpr *e, uint8_t type) {
    ProgramOption *option = option_read(b, a, e);
    if (option && option->is_float) {
        diag_error(a->span, "%s computes on %s values with the option '%s', which is a number, not an integer", a->what,
                   ir_dtype_word(type), option->name);
        diag_note(option->span, "'%s' is a number: its default is not an integer; convert the %s values with to_f32 to "
                  "compute with it", option->name, ir_dtype_word(type));
        b->failed = true;
        return false;
    }
    if (option) {
        if (!option_among(b, a, option, type)) return false;
        convert_in_place(b, e, type);
        return true;
    }
    double number;
    if (read_number(a, e, &number)) { /* read as the integer constant it is */
        e->kind = AE_CONST;
        e->value = number;
    }
    const char *word = ir_dtype_word(type);
    if (e->kind == AE_CONST) {
        double limit = type == TSR_DTYPE_I64 ? 0x1p63 : 0x1p31;
        if (e->value != floor(e->value) || e->value < -limit || e->value >= limit) {
            bool whole = e->value == floor(e->value);
            diag_error(a->span, whole ? "%s computes on %s values with the number %.0f, which is not an %s%s"
                                      : "%s computes on %s values with the number %.17g, which is not an %s%s",
                       a->what, word, e->value, word, whole ? ": it is beyond the type's range" : "");
            if (!whole)
                diag_note(a->span, "convert the %s values with to_f%s first to compute with fractions", word,
                          type == TSR_DTYPE_I64 ? "64" : "32");
            else if (type == TSR_DTYPE_I32)
                diag_note(a->span, "convert the i32 values with to_i64 first to compute beyond 2^31");
            else
                diag_note(a->span, "a number is a double: a written integer beyond 2^53 is rounded, and 2^63 and "
                          "beyond are no i64");
            b->failed = true;
            return false;
        }
        e->type = type;
        return true;
    }
    if (e->kind != AE_OP || scalar_op_conversion(e->op)) return true; /* a conversion's operand is its own */
    if (!scalar_op_integer(e->op)) {
        diag_error(a->span, "%s computes '%s' on %s values, which has no %s form (+ - * / mod neg abs sign floor max "
                   "min relu, comparisons, logical operations and where do)", a->what, scalar_op_name(e->op), word, word);
        diag_note(a->span, "convert with to_f%s first (exact below 2^%s), e.g. to_f%s x (docs/language.md §3.9)",
                  type == TSR_DTYPE_I64 ? "64" : "32", type == TSR_DTYPE_I64 ? "53" : "24", type == TSR_DTYPE_I64 ? "64" : "32");
        b->failed = true;
        return false;
    }
    e->type = type;
    for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
        if (!constants_to_int(b, a, e->args[i], type)) return false;
    return true;
}

/* Constants (and operations on constants alone) met by f64 arithmetic become f64s: the number as
 * written, a double, not its nearest f32. */
static void constants_to_f64(const Assignment *a, AExpr *e) {
    double number;
    if (read_number(a, e, &number)) {
        e->kind = AE_CONST;
        e->value = number;
    }
    if (e->kind == AE_CONST || e->kind == AE_OP) e->type = TSR_DTYPE_F64;
    if (e->kind == AE_OP)
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) constants_to_f64(a, e->args[i]);
}

/* e, of element type `from`, converted to `to` in place (a conversion wrapped around it).  An
 * expression's `type` is the type it computes in (ir.h IrExpr.type): f32 for bf16 and f16. */
void convert_in_place(Builder *b, AExpr *e, uint8_t to) {
    AExpr *inner = arena_alloc(b->ir->arena, sizeof *inner);
    *inner = *e;
    memset(e, 0, sizeof *e);
    e->kind = AE_OP;
    e->op = conversion_to(to);
    e->type = (uint8_t)ir_dtype_compute(to);
    e->args[0] = inner;
}

/* e, an expression of numbers of type `from` (or constants: DTYPE_ANY), as type `to`: values
 * widened (bf16 and f16 are computed as f32 already), constants typed. */
void numbers_as(Builder *b, const Assignment *a, AExpr *e, uint8_t from, uint8_t to) {
    if (from == DTYPE_ANY) {
        if (to == TSR_DTYPE_F64) constants_to_f64(a, e); /* an option's read is an f64 already */
        else if (is_int_dtype(to)) constants_to_int(b, a, e, (uint8_t)ir_dtype_compute(to));
        else options_as(b, a, e, (uint8_t)ir_dtype_compute(to));
    } else if (ir_dtype_compute(from) != ir_dtype_compute(to)) {
        convert_in_place(b, e, (uint8_t)ir_dtype_compute(to));
    }
}

static AExpr *new_aexpr(Builder *b, AExprKind kind, ScalarOp op, uint8_t type, double value, AExpr *x, AExpr *y) {
    AExpr *e = arena_alloc(b->ir->arena, sizeof *e);
    *e = (AExpr){.kind = kind, .op = op, .type = type, .value = value, .args = {x, y}};
    return e;
}

/* e, `to_u8 x` or `to_bool x` of an x of type `from` (DTYPE_ANY: constants), rewritten into the
 * i32 operations that compute it: `mod (to_i32 x) 256` (the low 8 bits; the floor modulo is the
 * two's complement's low bits, and an i64's to_i32 keeps its low 32) and `to_i32 (ne x 0)` in x's
 * own type (a NaN is not 0), or x itself where it is of the type (or bool, for to_u8) already.
 * Returns the type e has. */
static uint8_t byte_conversion(Builder *b, AExpr *e, uint8_t from) {
    bool to_bool = e->op == SOP_TO_BOOL;
    uint8_t to = to_bool ? TSR_DTYPE_BOOL : TSR_DTYPE_U8;
    AExpr *x = e->args[0];
    if (from == TSR_DTYPE_BOOL || from == to) {
        *e = *x;
        return to;
    }
    AExpr *computed;
    if (to_bool && is_int_dtype(from) && from != TSR_DTYPE_I64) {
        computed = new_aexpr(b, AE_OP, SOP_NE, TSR_DTYPE_I32, 0, x, new_aexpr(b, AE_CONST, 0, TSR_DTYPE_I32, 0, NULL, NULL));
    } else if (to_bool) {
        uint8_t type = from == DTYPE_ANY ? TSR_DTYPE_F32 : (uint8_t)ir_dtype_compute(from);
        AExpr *test = new_aexpr(b, AE_OP, SOP_NE, type, 0, x, new_aexpr(b, AE_CONST, 0, type, 0, NULL, NULL));
        computed = new_aexpr(b, AE_OP, SOP_TO_I32, TSR_DTYPE_I32, 0, test, NULL);
    } else {
        if (!is_int_dtype(from) || from == TSR_DTYPE_I64) x = new_aexpr(b, AE_OP, SOP_TO_I32, TSR_DTYPE_I32, 0, x, NULL);
        computed = new_aexpr(b, AE_OP, SOP_MOD, TSR_DTYPE_I32, 0, x, new_aexpr(b, AE_CONST, 0, TSR_DTYPE_I32, 256, NULL, NULL));
    }
    *e = *computed;
    return to;
}

/* Whether e is a number written with a fraction (`0.5`). */
static bool fractional(const Assignment *a, const AExpr *e) {
    double number;
    if (read_number(a, e, &number)) return number != floor(number);
    return e->kind == AE_CONST && e->value != floor(e->value);
}

/* Whether t is an operation on numbers alone (`vocab - 1` in a tensor expression: docs/language.md
 * §3.8), through at most 16 levels. */
static bool numbers_only(const Tensor *t, int depth) {
    if (t->kind == TENSOR_LITERAL) return t->value_count == 1;
    if (t->kind != TENSOR_OP || depth > 16 || !t->operand_count) return false;
    for (uint32_t i = 0; i < t->operand_count; i++)
        if (!numbers_only(t->operands[i], depth + 1)) return false;
    return true;
}

/* The element type of e.  A conversion to the type its operand already has is the operand
 * itself: e is rewritten into it here (to_f32 of an f32 copies bits no more than any read).  An
 * operation on i32 values (and constants) is computed on i32s: + - * wrap, / and mod floor,
 * comparisons give 1 or 0; one on f32 and f64 values in f64; an operation without an i32 form,
 * or one that mixes i32 values and numbers, is an error that names the cast. */
static uint8_t expr_dtype(Builder *b, const Assignment *a, AExpr *e) {
    switch (e->kind) {
    case AE_CONST: return DTYPE_ANY;
    case AE_RANDOM: return TSR_DTYPE_F32;
    case AE_KERNEL: return a->rhs_dtype; /* kernel_statement settled it */
    case AE_READ: {
        const Access *r = &a->reads[e->read];
        double number;
        if (read_number(a, e, &number) || option_read(b, a, e)) return DTYPE_ANY;
        return r->node.tensor->kind == TENSOR_INDEX ? TSR_DTYPE_F32 : node_dtype(r->node);
    }
    case AE_OP: {
        if (scalar_op_conversion(e->op)) {
            uint8_t from = expr_dtype(b, a, e->args[0]);
            if (b->failed) return TSR_DTYPE_F32;
            if (e->op == SOP_WIDEN) { /* a half value as the f32 it is, an integer as a number (an i64 as
                                       * the f64 it is, below 2^53), anything else itself */
                if (is_int_dtype(from)) {
                    e->op = from == TSR_DTYPE_I64 ? SOP_TO_F64 : SOP_TO_F32;
                    e->type = from == TSR_DTYPE_I64 ? TSR_DTYPE_F64 : TSR_DTYPE_F32;
                    return e->type;
                }
                *e = *e->args[0];
                return is_half_dtype(from) ? TSR_DTYPE_F32 : from;
            }
            if (e->op == SOP_TO_U8 || e->op == SOP_TO_BOOL) return byte_conversion(b, e, from);
            if (tsr_dtype_byte(from)) from = TSR_DTYPE_I32; /* u8 and bool values are i32s */
            uint8_t to = e->op == SOP_TO_I32 ? TSR_DTYPE_I32 : e->op == SOP_TO_F64 ? TSR_DTYPE_F64
                       : e->op == SOP_TO_BF16 ? TSR_DTYPE_BF16 : e->op == SOP_TO_F16 ? TSR_DTYPE_F16
                       : e->op == SOP_TO_I64 ? TSR_DTYPE_I64 : TSR_DTYPE_F32;
            if (from == TSR_DTYPE_I64 && is_half_dtype(to)) { /* through its double (exact below 2^53) */
                e->args[0] = new_aexpr(b, AE_OP, SOP_TO_F64, TSR_DTYPE_F64, 0, e->args[0], NULL);
                from = TSR_DTYPE_F64;
            }
            if (from == to || (from == DTYPE_ANY && to == TSR_DTYPE_F32)) { /* nothing to convert */
                *e = *e->args[0];
                return from;
            }
            if (is_half_dtype(from) && to == TSR_DTYPE_F32) /* a half value is an f32 already */
                *e = *e->args[0];
            if (is_half_dtype(from) && (to == TSR_DTYPE_F32 || to == TSR_DTYPE_F64)) { /* a widening */
                e->type = (uint8_t)to;
                return to;
            }
            if (is_half_dtype(to)) { /* a rounding, computed on f32 values (a number: its double) */
                if (from == DTYPE_ANY) constants_to_f64(a, e->args[0]);
                e->type = TSR_DTYPE_F32;
                return to;
            }
            if (from == DTYPE_ANY && to == TSR_DTYPE_F64) { /* a number as a double */
                *e = *e->args[0];
                constants_to_f64(a, e);
                return TSR_DTYPE_F64;
            }
            e->type = to;
            return to;
        }
        uint8_t types[3] = {DTYPE_ANY, DTYPE_ANY, DTYPE_ANY};
        bool any_i32 = false, any_float = false;
        uint8_t joined = DTYPE_ANY;
        const AExpr *integer = NULL, *number = NULL;
        uint8_t integer_type = TSR_DTYPE_I32;
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) {
            types[i] = expr_dtype(b, a, e->args[i]);
            if (b->failed) return TSR_DTYPE_F32;
        }
        /* `where c x y` whose condition is an integer and branches numbers (or the reverse): the
         * condition is tested against 0 in its own type, and the branches alone give the type
         * (an integer condition is converted to the branches' number type below, which keeps
         * whether it is 0; a number one becomes the i32 `to_i32 (ne c 0)`). */
        unsigned first = 0;
        if (e->op == SOP_WHERE) {
            bool int_branches = is_int_dtype(types[1]) || is_int_dtype(types[2]);
            bool float_branches = is_float_dtype(types[1]) || is_float_dtype(types[2]);
            if (types[1] == DTYPE_ANY && types[2] == DTYPE_ANY && (fractional(a, e->args[1]) || fractional(a, e->args[2]))) {
                types[1] = TSR_DTYPE_F32; /* two numbers written, one with a fraction (`where mask 0.5 0.`): f32 */
                float_branches = true;
            }
            if (is_int_dtype(types[0]) && float_branches && !int_branches) {
                first = 1;
            } else if (is_float_dtype(types[0]) && int_branches && !float_branches) {
                AExpr *c = new_aexpr(b, AE_OP, SOP_TO_BOOL, 0, 0, e->args[0], NULL);
                types[0] = byte_conversion(b, c, types[0]);
                e->args[0] = c;
            }
        }
        for (unsigned i = first; i < scalar_op_arity(e->op); i++) {
            uint8_t t = types[i];
            if (is_int_dtype(t) && !integer) integer = e->args[i], integer_type = t;
            if (is_float_dtype(t) && !number) number = e->args[i];
            any_i32 |= is_int_dtype(t);
            any_float |= is_float_dtype(t);
            if (is_float_dtype(t)) joined = float_join(joined, t);
        }
        if (!any_i32 && !any_float) return DTYPE_ANY; /* constants alone */
        if (!any_i32) { /* computed in f64 or f32 (bf16 and f16 values are f32 ones, exactly) */
            e->type = (uint8_t)ir_dtype_compute(joined);
            for (unsigned i = 0; i < scalar_op_arity(e->op); i++) numbers_as(b, a, e->args[i], types[i], joined);
            return joined;
        }
        const char *name = integer->kind == AE_READ ? node_text(b, a->reads[integer->read].node) : "an i32 value";
        if (any_float) {
            uint8_t other = expr_dtype(b, a, (AExpr *)number);
            const Tensor *from = number->kind == AE_READ && !a->reads[number->read].node.grad
                                     ? a->reads[number->read].node.tensor : NULL;
            if (from && numbers_only(from, 0)) {
                diag_error(a->span, "%s computes '%s' of %s and %s values (%s is %s, and an operation between numbers "
                           "is an f32 tensor)", a->what, scalar_op_name(e->op), dtype_word(integer_type),
                           dtype_word(other), name, dtype_word(integer_type));
                diag_note(from->span, "this operation between numbers is bound to a name, so it is a one-cell f32 "
                          "tensor of its own (docs/language.md §3.8); in !..( ) it is the number itself, as a written one");
                b->failed = true;
                return TSR_DTYPE_F32;
            }
            diag_error(a->span, "%s computes '%s' of %s and %s values (%s is %s)", a->what, scalar_op_name(e->op),
                       dtype_word(integer_type), dtype_word(other), name, dtype_word(integer_type));
            diag_note(a->span, "convert one side: to_%s x for numbers (exact below 2^%d), to_%s x for integers "
                      "(docs/language.md §3.9)", dtype_word(other), other == TSR_DTYPE_F64 ? 53 : other == TSR_DTYPE_BF16 ? 8
                      : other == TSR_DTYPE_F16 ? 11 : 24, integer_type == TSR_DTYPE_I64 ? "i64" : "i32");
            b->failed = true;
            return TSR_DTYPE_F32;
        }
        /* on i32s, or on i64s where one is an i64: the narrower integers widened (exactly) */
        uint8_t ijoined = DTYPE_ANY;
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
            if (is_int_dtype(types[i])) ijoined = int_join(ijoined, types[i]);
        uint8_t result = (uint8_t)ir_dtype_compute(ijoined);
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
            if (is_int_dtype(types[i]) && ir_dtype_compute(types[i]) != result) convert_in_place(b, e->args[i], result);
        if (!constants_to_int(b, a, e, result)) return TSR_DTYPE_F32;
        return result;
    }
    }
    return TSR_DTYPE_F32;
}

/* Whether a is `=:+` of one read that reaches each cell once: it adds each value to the neutral
 * 0 once, a copy (as a slice through a spec, `x ++ "a^q => a"`, is). */
bool adds_once(const Assignment *a) {
    return a->accum == ACC_ADD && a->reset && a->rhs->kind == AE_READ && a->proj && proj_writes_once(a->proj, a->lhs.slot);
}

/* A number of e computed as an f32 that f32 cannot hold (it would be infinity); reported, and
 * false, at the first. */
static bool constants_fit_f32(Builder *b, const Assignment *a, const AExpr *e) {
    if (!e) return true;
    if (e->kind == AE_CONST && e->type == TSR_DTYPE_F32 && overflows_type(e->value, TSR_DTYPE_F32)) {
        diag_error(a->span, "%s computes on f32 values with the number %g, which is beyond the range of f32 (±%.9g): as "
                   "an f32 it would be infinity", a->what, e->value, 3.4028234663852886e38);
        diag_note(a->span, "a number that meets f64 values is a double: compute with f64 tensors (dtype = \"f64\", or "
                  "to_f64 x) to use it (docs/language.md §3.9)");
        b->failed = true;
        return false;
    }
    if (e->kind != AE_OP || e->type != TSR_DTYPE_F32) return true; /* other types' numbers are checked as such */
    for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
        if (!constants_fit_f32(b, a, e->args[i])) return false;
    return true;
}

static bool convert_rhs(Builder *b, Assignment *a, uint8_t lhs_dtype);

/* The type of a's right side into a->rhs_dtype, converted to what the left side keeps where
 * that is allowed; false after an error.  `lhs_dtype` is the type the left side keeps
 * (DTYPE_ANY: the left side takes the right side's, an operation's result). */
bool check_rhs_dtype(Builder *b, Assignment *a, uint8_t lhs_dtype) {
    return convert_rhs(b, a, lhs_dtype) && constants_fit_f32(b, a, a->rhs);
}

static bool convert_rhs(Builder *b, Assignment *a, uint8_t lhs_dtype) {
    a->rhs_dtype = expr_dtype(b, a, a->rhs);
    if (b->failed) return false;
    bool lhs_i32 = is_int_dtype(lhs_dtype), rhs_i32 = is_int_dtype(a->rhs_dtype);
    bool integer_accum = a->accum == ACC_ADD || a->accum == ACC_SUB || a->accum == ACC_MUL || a->accum == ACC_MAX ||
                         a->accum == ACC_MIN;
    if ((lhs_i32 || rhs_i32) && a->accum != ACC_NONE && !integer_accum) {
        diag_error(a->span, "%s accumulates i32 values into %s with '%s', which has no i32 form (=+ =- =* and the "
                   "max and min accumulations do)", a->what, node_text(b, a->lhs.node), accum_text(a->accum, a->reset));
        diag_note(a->span, "convert with to_f32 to accumulate numbers");
        b->failed = true;
        return false;
    }
    if (lhs_i32 && a->rhs_dtype == DTYPE_ANY && !constants_to_int(b, a, a->rhs, (uint8_t)ir_dtype_compute(lhs_dtype)))
        return false;
    if (rhs_i32 && adds_once(a)) a->accum = ACC_NONE; /* a copy, stored as it is (lowering would add to 0) */
    bool arithmetic = a->accum == ACC_ADD || a->accum == ACC_SUB || a->accum == ACC_MUL;
    if (lhs_dtype == DTYPE_ANY && arithmetic && tsr_dtype_byte(a->rhs_dtype))
        a->rhs_dtype = TSR_DTYPE_I32; /* sums and products of u8 or bool values count in i32 (NumPy's sum) */
    if (lhs_dtype == DTYPE_ANY || a->rhs_dtype == lhs_dtype) return true;
    if (a->rhs_dtype == DTYPE_ANY) { /* constants take the left side's type */
        numbers_as(b, a, a->rhs, DTYPE_ANY, lhs_dtype);
        return true;
    }
    bool widening = widens(a->rhs_dtype, lhs_dtype);
    bool into_gradient = a->lhs.node.grad && is_float_dtype(a->rhs_dtype) && is_float_dtype(lhs_dtype);
    if (widening || into_gradient) {
        /* f32 values into a bf16 or f16 gradient: the store rounds them; f64 values: one rounding */
        bool store_rounds = is_half_dtype(lhs_dtype) && a->rhs_dtype != TSR_DTYPE_F64;
        if (!store_rounds && ir_dtype_compute(a->rhs_dtype) != ir_dtype_compute(lhs_dtype)) convert_in_place(b, a->rhs, lhs_dtype);
        a->rhs_dtype = lhs_dtype;
        return true;
    }
    diag_error(a->span, "%s stores %s values into %s, which is %s", a->what, dtype_word(a->rhs_dtype),
               node_text(b, a->lhs.node), dtype_word(lhs_dtype));
    if (is_float_dtype(lhs_dtype) && is_float_dtype(a->rhs_dtype))
        diag_note(a->span, "round with to_%s (to the nearest %s), or declare %s %s (dtype = \"%s\", docs/language.md §3.9)",
                  dtype_word(lhs_dtype), dtype_word(lhs_dtype), node_text(b, a->lhs.node), dtype_word(float_join(lhs_dtype, a->rhs_dtype)),
                  dtype_word(float_join(lhs_dtype, a->rhs_dtype)));
    else
        diag_note(a->span, "convert with to_%s (%s)", dtype_word(lhs_dtype),
                  lhs_dtype == TSR_DTYPE_I32 ? "toward zero" : lhs_dtype == TSR_DTYPE_U8 ? "the low 8 bits"
                  : lhs_dtype == TSR_DTYPE_BOOL ? "not 0" : "the nearest value");
    b->failed = true;
    return false;
}
