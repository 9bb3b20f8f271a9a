/* ir.c — the loop IR's shared vocabulary: scalar operations and accumulators (their names and
 * single-precision meaning, used alike by the reference executor and the constant folder), the
 * stable `--emit=ir` dump, and the verifier that the driver runs after lowering and after
 * optimisation (cheap enough to run always).
 *
 * The dump's format and the invariants the verifier checks are documented in docs/ir.md. */
#include "ir/ir.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/diag.h"
#include "ir/approx.h"
#include "runtime/tsr.h"

/* ---- Scalar operations ----------------------------------------------------------------------- */

static const struct {
    const char *name;
    unsigned arity;
} scalar_ops[SOP_COUNT] = {
#define SOP_ROW(op, name, arity) {name, arity},
    SCALAR_OPS(SOP_ROW)
#undef SOP_ROW
};

const char *scalar_op_name(ScalarOp op) { return scalar_ops[op].name; }

const char *ir_dtype_word(unsigned dtype) {
#define DTYPE_WORD(name, word, numpy, ctype) word,
    static const char *const words[] = {TSR_DTYPE_KINDS(DTYPE_WORD)};
#undef DTYPE_WORD
    return dtype < sizeof words / sizeof words[0] ? words[dtype] : "?";
}

unsigned ir_dtype_bytes(unsigned dtype) {
#define DTYPE_BYTES(name, word, numpy, ctype) sizeof(ctype),
    static const unsigned char bytes[] = {TSR_DTYPE_KINDS(DTYPE_BYTES)};
#undef DTYPE_BYTES
    return dtype < sizeof bytes ? bytes[dtype] : 4;
}
unsigned ir_dtype_compute(unsigned dtype) { return ir_dtype_half(dtype) ? DTYPE_F32 : ir_dtype_byte(dtype) ? DTYPE_I32 : dtype; }

unsigned scalar_op_arity(ScalarOp op) { return scalar_ops[op].arity; }
bool scalar_op_infix(ScalarOp op) { return !(scalar_ops[op].name[0] >= 'a' && scalar_ops[op].name[0] <= 'z'); }

/* SOP_TO_TF32 is the compiler's (--tf32), not a primitive of %cd code. */
static bool in_language(int op) { return op != SOP_TO_TF32; }

float ir_f32_to_tf32(float x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    if ((bits & 0x7f800000u) != 0x7f800000u) bits = (bits + 0x1000u) & ~0x1fffu; /* the magnitude's carry may reach the exponent */
    memcpy(&x, &bits, sizeof x);
    return x;
}

int scalar_op_lookup(const char *name, bool binary) {
    for (int op = 0; op < SOP_COUNT; op++)
        if (in_language(op) && scalar_op_infix((ScalarOp)op) == binary && strcmp(scalar_ops[op].name, name) == 0) return op;
    return -1;
}

int scalar_op_code(const char *name, bool binary, bool *swapped) {
    *swapped = binary && (strcmp(name, ">") == 0 || strcmp(name, ">=") == 0);
    if (!binary) return scalar_op_lookup(name, false);
    if (strcmp(name, ">") == 0) return SOP_LT;
    if (strcmp(name, ">=") == 0) return SOP_LE;
    if (strcmp(name, "=") == 0) return SOP_EQ;
    return scalar_op_lookup(name, true);
}

bool scalar_code_builtin(const char *name) {
    static const char *const names[] = {"random", "attention", "causal_attention", "dropout_attention",
                                        "causal_dropout_attention", "attention_dq", "attention_dk", "attention_dv"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(name, names[i]) == 0) return true;
    return false;
}

const char *scalar_op_closest(const char *name, bool binary) {
    const char *names[SOP_COUNT];
    size_t count = 0;
    for (int op = 0; op < SOP_COUNT; op++)
        if (in_language(op) && scalar_op_infix((ScalarOp)op) == binary) names[count++] = scalar_ops[op].name;
    return diag_closest_name(name, names, count);
}

/* The floor modulo of f32s, as NumPy's remainder computes it: fmodf's remainder (exact, with a's
 * sign) moved to b's sign by adding b once where the signs differ, a zero remainder given b's
 * sign; NaN where b is 0 or a infinite. */
static float floor_mod(float a, float b) {
    float r = fmodf(a, b);
    if (r == 0.0f) return copysignf(0.0f, b);
    return (r < 0.0f) != (b < 0.0f) ? r + b : r;
}

float scalar_op_eval(ScalarOp op, float a, float b, float c) {
    switch (op) {
    case SOP_ADD: return a + b;
    case SOP_SUB: return a - b;
    case SOP_MUL: return a * b;
    case SOP_DIV: return a / b;
    case SOP_POW: return powf(a, b);
    case SOP_LT: return a < b ? 1.0f : 0.0f;
    case SOP_LE: return a <= b ? 1.0f : 0.0f;
    case SOP_EQ: return a == b ? 1.0f : 0.0f;
    case SOP_NE: return a != b ? 1.0f : 0.0f; /* true when either is NaN (IEEE) */
    case SOP_MAX: return a != a || b != b ? a + b : a > b ? a : b; /* a NaN wins (a + b is one) */
    case SOP_MIN: return a != a || b != b ? a + b : a < b ? a : b;
    case SOP_MOD: return floor_mod(a, b);
    case SOP_RELU_GATE: return a > 0.0f ? b : 0.0f;
    case SOP_SAT01_GATE: return a > 0.0f && a < 1.0f ? b : 0.0f;
    case SOP_OR: return a != 0.0f || b != 0.0f ? 1.0f : 0.0f;
    case SOP_AND: return a != 0.0f && b != 0.0f ? 1.0f : 0.0f;
    case SOP_NEG: return -a;
    case SOP_RELU: return a <= 0.0f ? 0.0f : a; /* NaN stays NaN, as in PyTorch (an unordered compare) */
    case SOP_EXP: return approx_exp(a);
    case SOP_LOG: return approx_log(a);
    case SOP_SQRT: return sqrtf(a);
    case SOP_TANH: return approx_tanh(a);
    case SOP_SIGMOID: return 1.0f / (1.0f + approx_exp(-a));
    case SOP_SIN: return sinf(a);
    case SOP_COS: return cosf(a);
    case SOP_LOG2: return log2f(a);
    case SOP_EXP2: return exp2f(a);
    case SOP_RECIP: return 1.0f / a;
    case SOP_RSQRT: return 1.0f / sqrtf(a);
    case SOP_SAT01: return a <= 0.0f ? 0.0f : a >= 1.0f ? 1.0f : a; /* NaN stays NaN, as relu */
    case SOP_ABS: return fabsf(a);
    case SOP_SIGN: return a > 0.0f ? 1.0f : a < 0.0f ? -1.0f : a; /* ±0 and NaN are kept */
    case SOP_FLOOR: return floorf(a);
    case SOP_NOT: return a == 0.0f ? 1.0f : 0.0f; /* NaN counts as true, as in where */
    case SOP_WHERE: return a != 0.0f ? b : c;
    case SOP_FMA: return fmaf(a, b, c);
    case SOP_TO_TF32: return ir_f32_to_tf32(a);
    case SOP_TO_F32: return (float)ir_i32_of_bits(a);
    case SOP_TO_I32: return ir_bits_of_i32(ir_f32_to_i32(a));
    case SOP_TO_F64:
    case SOP_TO_BF16: /* (ir_op_eval: they need the operand's type) */
    case SOP_TO_F16:
    case SOP_WIDEN: /* (assign.c replaces these by their operand, a widening or i32 operations) */
    case SOP_TO_U8:
    case SOP_TO_BOOL:
    case SOP_TO_I64: /* (ir_op_eval: it needs the operand's type) */
    case SOP_COUNT: break;
    }
    return NAN;
}

/* The floor modulo of f64s, as floor_mod of f32s (fmod's remainder is exact). */
static double floor_mod_f64(double a, double b) {
    double r = fmod(a, b);
    if (r == 0.0) return copysign(0.0, b);
    return (r < 0.0) != (b < 0.0) ? r + b : r;
}

double ir_f64_op_eval(ScalarOp op, double a, double b, double c) {
    switch (op) {
    case SOP_ADD: return a + b;
    case SOP_SUB: return a - b;
    case SOP_MUL: return a * b;
    case SOP_DIV: return a / b;
    case SOP_POW: return pow(a, b);
    case SOP_LT: return a < b ? 1.0 : 0.0;
    case SOP_LE: return a <= b ? 1.0 : 0.0;
    case SOP_EQ: return a == b ? 1.0 : 0.0;
    case SOP_NE: return a != b ? 1.0 : 0.0;
    case SOP_MAX: return a != a || b != b ? a + b : a > b ? a : b;
    case SOP_MIN: return a != a || b != b ? a + b : a < b ? a : b;
    case SOP_MOD: return floor_mod_f64(a, b);
    case SOP_RELU_GATE: return a > 0.0 ? b : 0.0;
    case SOP_SAT01_GATE: return a > 0.0 && a < 1.0 ? b : 0.0;
    case SOP_OR: return a != 0.0 || b != 0.0 ? 1.0 : 0.0;
    case SOP_AND: return a != 0.0 && b != 0.0 ? 1.0 : 0.0;
    case SOP_NEG: return -a;
    case SOP_RELU: return a <= 0.0 ? 0.0 : a;
    case SOP_EXP: return exp(a);
    case SOP_LOG: return log(a);
    case SOP_SQRT: return sqrt(a);
    case SOP_TANH: return tanh(a);
    case SOP_SIGMOID: return 1.0 / (1.0 + exp(-a));
    case SOP_SIN: return sin(a);
    case SOP_COS: return cos(a);
    case SOP_LOG2: return log2(a);
    case SOP_EXP2: return exp2(a);
    case SOP_RECIP: return 1.0 / a;
    case SOP_RSQRT: return 1.0 / sqrt(a);
    case SOP_SAT01: return a <= 0.0 ? 0.0 : a >= 1.0 ? 1.0 : a;
    case SOP_ABS: return fabs(a);
    case SOP_SIGN: return a > 0.0 ? 1.0 : a < 0.0 ? -1.0 : a;
    case SOP_FLOOR: return floor(a);
    case SOP_NOT: return a == 0.0 ? 1.0 : 0.0;
    case SOP_WHERE: return a != 0.0 ? b : c;
    case SOP_FMA: return fma(a, b, c);
    default: break; /* the conversions: ir_op_eval */
    }
    return NAN;
}

int32_t ir_f64_to_i32(double x) {
    if (x != x) return 0;
    if (x >= 2147483648.0) return INT32_MAX;
    if (x <= -2147483648.0) return INT32_MIN;
    return (int32_t)x;
}

bool scalar_op_conversion(ScalarOp op) {
    return op == SOP_TO_F32 || op == SOP_TO_I32 || op == SOP_TO_F64 || op == SOP_TO_BF16 || op == SOP_TO_F16 ||
           op == SOP_WIDEN || op == SOP_TO_U8 || op == SOP_TO_BOOL || op == SOP_TO_I64;
}

/* A value of type `from` (f32, f64 or i32) rounded once to the nearest bf16 (or f16) value, as an
 * f32: tsr.h's conversions, from f64 through round-to-odd (an i32 is exact as an f64; element
 * types give an i64 to_f64 first). */
static float round_to_half(ScalarOp op, unsigned from, IrValue v) {
    bool bf16 = op == SOP_TO_BF16;
    if (from == DTYPE_F32) return bf16 ? tsr_bf16_to_f32(tsr_f32_to_bf16(v.f)) : tsr_f16_to_f32(tsr_f32_to_f16(v.f));
    double d = from == DTYPE_F64 ? v.d : (double)ir_i32_of_bits(v.f);
    return bf16 ? tsr_bf16_to_f32(tsr_f64_to_bf16(d)) : tsr_f16_to_f32(tsr_f64_to_f16(d));
}

/* A value of type `from` as type `to` (SOP_TO_*): integers to numbers rounded to nearest, numbers
 * to integers toward zero and saturating, f64 to f32 rounded to nearest, f32 to f64 exactly; an
 * i32 to an i64 exactly, an i64 to an i32 by its low 32 bits (wrapping, as NumPy's astype). */
static IrValue convert_value(unsigned from, unsigned to, IrValue v) {
    IrValue r = v;
    if (from == to) return r;
    if (to == DTYPE_I64) {
        r.i = from == DTYPE_I32 ? ir_i32_of_bits(v.f) : ir_f64_to_i64(from == DTYPE_F64 ? v.d : (double)v.f);
        return r;
    }
    if (from == DTYPE_I64) {
        if (to == DTYPE_I32) r.f = ir_bits_of_i32((int32_t)(uint32_t)(uint64_t)v.i);
        else if (to == DTYPE_F64) r.d = (double)v.i;
        else r.f = (float)v.i;
        return r;
    }
    if (to == DTYPE_I32) r.f = ir_bits_of_i32(from == DTYPE_F64 ? ir_f64_to_i32(v.d) : ir_f32_to_i32(v.f));
    else if (to == DTYPE_F64) r.d = from == DTYPE_I32 ? (double)ir_i32_of_bits(v.f) : (double)v.f;
    else r.f = from == DTYPE_I32 ? (float)ir_i32_of_bits(v.f) : (float)v.d;
    return r;
}

IrValue ir_op_eval(ScalarOp op, unsigned type, unsigned operands, const IrValue x[3]) {
    IrValue r = {0};
    if (op == SOP_TO_BF16 || op == SOP_TO_F16) {
        r.f = round_to_half(op, operands, x[0]);
        return r;
    }
    if (scalar_op_conversion(op)) return convert_value(operands, type, x[0]);
    if (type == DTYPE_I32) r.f = ir_bits_of_i32(ir_i32_op_eval(op, ir_i32_of_bits(x[0].f), ir_i32_of_bits(x[1].f), ir_i32_of_bits(x[2].f)));
    else if (type == DTYPE_I64) r.i = ir_i64_op_eval(op, x[0].i, x[1].i, x[2].i);
    else if (type == DTYPE_F64) r.d = ir_f64_op_eval(op, x[0].d, x[1].d, x[2].d);
    else r.f = scalar_op_eval(op, x[0].f, x[1].f, x[2].f);
    return r;
}

IrValue ir_const_value(unsigned type, double value) {
    IrValue v = {0};
    if (type == DTYPE_F64) v.d = value;
    else if (type == DTYPE_I64) v.i = ir_f64_to_i64(value); /* the limits held (2^63 is INT64_MAX's double) */
    else if (type == DTYPE_I32) v.f = ir_bits_of_i32((int32_t)value);
    else v.f = (float)value;
    return v;
}

double ir_value_number(unsigned type, IrValue v) {
    return type == DTYPE_F64 ? v.d : type == DTYPE_I64 ? (double)v.i : type == DTYPE_I32 ? (double)ir_i32_of_bits(v.f) : (double)v.f;
}

bool scalar_op_integer(ScalarOp op) {
    switch (op) {
    case SOP_ADD: case SOP_SUB: case SOP_MUL: case SOP_DIV: case SOP_MOD: case SOP_NEG: case SOP_ABS: case SOP_SIGN:
    case SOP_FLOOR: case SOP_MAX: case SOP_MIN: case SOP_RELU: case SOP_LT: case SOP_LE: case SOP_EQ: case SOP_NE:
    case SOP_OR: case SOP_AND: case SOP_NOT: case SOP_WHERE:
        return true;
    default: return false;
    }
}

/* Floor division and floor modulo of i64s (NumPy's // and % on int64): C's quotient and
 * remainder round toward zero, so where the remainder is not 0 and its sign differs from b's the
 * quotient is one less and the remainder b more.  b = 0 gives 0 and 0, and b = -1 the negation
 * (wrapping: INT64_MIN / -1 is INT64_MIN) and 0, without the C division, which is undefined
 * there (and traps on x86). */
static int64_t floor_div_i64(int64_t a, int64_t b, bool modulo) {
    if (b == 0) return 0;
    if (b == -1) return modulo ? 0 : (int64_t)(0u - (uint64_t)a);
    int64_t q = a / b, r = a % b;
    bool adjust = r != 0 && (r < 0) != (b < 0);
    return modulo ? (adjust ? r + b : r) : (adjust ? q - 1 : q);
}

/* The i32 results are the low 32 bits of the i64 ones on the same values (two's complement:
 * sums, differences, products and negations wrap alike, INT32_MIN / -1 is 2^31, whose low bits
 * are INT32_MIN; the rest fit). */
int32_t ir_i32_op_eval(ScalarOp op, int32_t a, int32_t b, int32_t c) {
    return (int32_t)(uint32_t)(uint64_t)ir_i64_op_eval(op, a, b, c);
}

int64_t ir_i64_op_eval(ScalarOp op, int64_t a, int64_t b, int64_t c) {
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b; /* wrapping arithmetic, without signed overflow */
    switch (op) {
    case SOP_ADD: return (int64_t)(ua + ub);
    case SOP_SUB: return (int64_t)(ua - ub);
    case SOP_MUL: return (int64_t)(ua * ub);
    case SOP_DIV: return floor_div_i64(a, b, false);
    case SOP_MOD: return floor_div_i64(a, b, true);
    case SOP_FLOOR: return a;
    case SOP_NEG: return (int64_t)(0u - ua);
    case SOP_ABS: return a < 0 ? (int64_t)(0u - ua) : a;
    case SOP_SIGN: return a > 0 ? 1 : a < 0 ? -1 : 0;
    case SOP_MAX: return a > b ? a : b;
    case SOP_MIN: return a < b ? a : b;
    case SOP_RELU: return a > 0 ? a : 0;
    case SOP_LT: return a < b;
    case SOP_LE: return a <= b;
    case SOP_EQ: return a == b;
    case SOP_NE: return a != b;
    case SOP_OR: return a != 0 || b != 0;
    case SOP_AND: return a != 0 && b != 0;
    case SOP_NOT: return a == 0;
    case SOP_WHERE: return a != 0 ? b : c;
    default: return 0;
    }
}

int32_t ir_i32_of_bits(float bits) {
    int32_t v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

float ir_bits_of_i32(int32_t v) {
    float bits;
    memcpy(&bits, &v, sizeof bits);
    return bits;
}

int64_t ir_f64_to_i64(double x) {
    if (x != x) return 0;
    if (x >= 0x1p63) return INT64_MAX;
    if (x <= -0x1p63) return INT64_MIN;
    return (int64_t)x;
}

int32_t ir_f32_to_i32(float x) {
    if (x != x) return 0;
    if (x >= 2147483648.0f) return INT32_MAX;
    if (x <= -2147483648.0f) return INT32_MIN;
    return (int32_t)x;
}

/* ---- Accumulators ---------------------------------------------------------------------------- */

static const struct {
    const char *suffix; /* after "=" or "=:" */
    ScalarOp op;        /* lhs ⊕ r */
    float neutral;
} accums[] = {
    [ACC_NONE] = {"", SOP_COUNT, 0.0f},
    [ACC_ADD] = {"+", SOP_ADD, 0.0f},
    [ACC_SUB] = {"-", SOP_SUB, 0.0f},
    [ACC_MUL] = {"*", SOP_MUL, 1.0f},
    [ACC_DIV] = {"/", SOP_DIV, 1.0f},
    [ACC_POW] = {"**", SOP_POW, 1.0f},
    [ACC_RELU_GATE] = {"?/", SOP_RELU_GATE, 1.0f},
    [ACC_SAT01_GATE] = {"?^", SOP_SAT01_GATE, 0.5f},
    [ACC_OR] = {"||", SOP_OR, 0.0f},
    [ACC_AND] = {"&&", SOP_AND, 1.0f},
    [ACC_MAX] = {"@^", SOP_MAX, -INFINITY},
    [ACC_MIN] = {"@-", SOP_MIN, INFINITY},
};

bool accum_parse(const char *text, AccumOp *op, bool *reset) {
    if (text[0] != '=') return false;
    text++;
    *reset = text[0] == ':';
    if (*reset) text++;
    for (unsigned i = 0; i < sizeof accums / sizeof accums[0]; i++)
        if (strcmp(accums[i].suffix, text) == 0) {
            if (i == ACC_NONE && !*reset) return false; /* plain "=" is not an assignment */
            *op = (AccumOp)i;
            if (i == ACC_NONE) *reset = false; /* `=:` overwrites; nothing to reset */
            return true;
        }
    return false;
}

const char *accum_text(AccumOp op, bool reset) {
    static char buf[16][8];
    static unsigned next;
    char *b = buf[next++ % 16];
    snprintf(b, 8, "=%s%s", reset || op == ACC_NONE ? ":" : "", accums[op].suffix);
    return b;
}

float accum_neutral(AccumOp op) { return accums[op].neutral; }

ScalarOp accum_scalar_op(AccumOp op) { return accums[op].op; }

float accum_apply(AccumOp op, float lhs, float r) {
    return op == ACC_NONE ? r : scalar_op_eval(accums[op].op, lhs, r, 0.0f);
}

void ir_block_push(Arena *arena, IrBlock *block, IrStmt *stmt) {
    ARENA_PUSH(arena, block->items, block->count, block->cap, stmt);
}

uint32_t ir_twin(IrProgram *ir, uint32_t of, DType dtype, const char *name) {
    const IrBuffer *model = &ir->buffers[of];
    IrBuffer b = {.id = ir->buffer_count, .kind = BUF_SCRATCH, .dtype = dtype, .rank = model->rank, .dims = model->dims,
                  .size = model->size, .init = INIT_NONE, .shape_text = model->shape_text,
                  .size_symbol = model->size_symbol, .name = name};
    ARENA_PUSH(ir->arena, ir->buffers, ir->buffer_count, ir->buffer_cap, b);
    return b.id;
}

uint32_t ir_symbol(const IrProgram *ir, const char *name) {
    for (uint32_t i = 0; i < ir->symbol_count; i++)
        if (strcmp(ir->symbols[i].name, name) == 0) return i;
    return UINT32_MAX;
}

/* ---- The dump ---------------------------------------------------------------------------------- */

static const char *const buffer_kinds[] = {"literal", "param", "constant", "input", "data", "computed", "scratch"};

static void print_number(FILE *out, double v) {
    if (isinf(v)) fputs(v < 0 ? "-inf" : "inf", out);
    else if (isnan(v)) fputs("nan", out);
    else if (v == 0 && signbit(v)) fputs("-0", out);
    else if (fabs(v) < 1e15 && v == (double)(int64_t)v) fprintf(out, "%" PRId64, (int64_t)v);
    else fprintf(out, "%.9g", v);
}

static void print_expr(FILE *out, const IrProgram *ir, const IrExpr *e);

static void print_index(FILE *out, const IrProgram *ir, const IrIndex *ix) {
    if (ix->gather) { /* a gathered axis: at the value of its expression */
        fputs("gather ", out);
        print_expr(out, ir, ix->gather);
        return;
    }
    bool any = false;
    for (uint32_t t = 0; t < ix->term_count; t++) {
        int64_t c = ix->terms[t].coef;
        if (any) fputs(c < 0 ? " - " : " + ", out);
        else if (c < 0) fputc('-', out);
        int64_t m = c < 0 ? -c : c;
        if (m != 1) fprintf(out, "%" PRId64 "*", m);
        fprintf(out, "i%u", ix->terms[t].iter);
        any = true;
    }
    if (ix->symbol) {
        fprintf(out, "%s%s", any ? " + " : "", ix->symbol);
        any = true;
    }
    if (ix->offset || !any) {
        if (any) fprintf(out, " %c %" PRId64, ix->offset < 0 ? '-' : '+', ix->offset < 0 ? -ix->offset : ix->offset);
        else fprintf(out, "%" PRId64, ix->offset);
    }
}

static void print_access(FILE *out, const IrProgram *ir, uint32_t buffer, const IrIndex *index) {
    const IrBuffer *b = &ir->buffers[buffer];
    fputs(b->name, out);
    fputc('[', out);
    for (uint32_t a = 0; a < b->rank; a++) {
        if (a) fputs(", ", out);
        print_index(out, ir, &index[a]);
    }
    fputc(']', out);
}

static void print_expr(FILE *out, const IrProgram *ir, const IrExpr *e) {
    switch (e->kind) {
    case IR_CONST:
        if (e->type == DTYPE_F64 && e->value != (double)(int64_t)e->value && isfinite(e->value)) fprintf(out, "%.17g", e->value);
        else print_number(out, e->value);
        if (e->type == DTYPE_I32) fputc('i', out); /* an i32 constant */
        if (e->type == DTYPE_I64) fputc('L', out); /* an i64 constant */
        if (e->type == DTYPE_F64) fputc('d', out); /* an f64 constant */
        break;
    case IR_LOAD: print_access(out, ir, e->buffer, e->index); break;
    case IR_LOCAL: fprintf(out, "l%u", e->local); break;
    case IR_SYMBOL: fprintf(out, "(index %s)", e->symbol); break;
    case IR_RANDOM:
        fputs("random(", out);
        print_access(out, ir, e->buffer, e->index);
        fputc(')', out);
        break;
    case IR_OP: {
        unsigned n = scalar_op_arity(e->op);
        const char *name = scalar_op_name(e->op);
        bool infix = scalar_op_infix(e->op);
        /* on i32 values: `+i`, `maxi(…)`; on f64 values: `+d`, `expd(…)` */
        const char *i32 = scalar_op_conversion(e->op) ? "" : e->type == DTYPE_I32 ? "i" : e->type == DTYPE_F64 ? "d"
                        : e->type == DTYPE_I64 ? "L" : "";
        if (infix) {
            fputc('(', out);
            print_expr(out, ir, e->args[0]);
            fprintf(out, " %s%s ", name, i32);
            print_expr(out, ir, e->args[1]);
            fputc(')', out);
        } else {
            fprintf(out, "%s%s(", name, i32);
            for (unsigned i = 0; i < n; i++) {
                if (i) fputs(", ", out);
                print_expr(out, ir, e->args[i]);
            }
            fputc(')', out);
        }
        break;
    }
    }
}

/* An extent or an axis length: a number, or the size symbol of a run-time size ("x.b"). */
static void print_size(FILE *out, const IrProgram *ir, uint64_t n) {
    uint32_t k = size_is_runtime(n) ? size_class(n) : 0;
    if (!k) fprintf(out, "%" PRIu64, n);
    else if (k < ir->class_count && ir->class_symbol[k] < ir->symbol_count) fputs(ir->symbols[ir->class_symbol[k]].name, out);
    else fprintf(out, "?%u", k);
}

static const char *swizzle_word(uint32_t swizzle) {
    return swizzle == 128 ? " swizzled 128B" : swizzle == 64 ? " swizzled 64B" : swizzle == 32 ? " swizzled 32B" : "";
}

static void print_block(FILE *out, const IrProgram *ir, const IrBlock *block, int depth) {
    for (uint32_t i = 0; i < block->count; i++) {
        const IrStmt *s = block->items[i];
        if (s->comment) fprintf(out, "%*s# %s\n", depth * 2, "", s->comment);
        fprintf(out, "%*s", depth * 2, "");
        switch (s->kind) {
        case IR_LOOP:
            fprintf(out, "for i%u < ", s->iter);
            print_size(out, ir, s->extent);
            fprintf(out, " %s%s", s->parallel ? "parallel" : "reduction",
                    s->mode == LOOP_UNROLL ? " unroll" : s->mode == LOOP_VECTOR ? " vector"
                    : s->mode == LOOP_TRANSPOSE ? " transpose" : s->mode == LOOP_ASYNC_COPY ? " async_copy" : "");
            if (s->mode == LOOP_TRANSPOSE && s->prefetch_rows) fprintf(out, " prefetching %u rows ahead", s->prefetch_rows);
            if (s->mode == LOOP_DOT_PAIRS) fprintf(out, " dot_pairs unless l%u", s->local);
            if (s->mode == LOOP_BLOCKS) {
                fprintf(out, " blocks of %u", s->block);
                if (s->block_after) fprintf(out, " after blocks of %u", s->block_after);
                fprintf(out, ", setting %s", ir->symbols[s->block_symbol].name);
            }
            static const char *const gpu_modes[] = {"gpu.x", "gpu.y", "gpu.z", "gpu.block.x", "gpu.block.y",
                                                    "gpu.block.z", "gpu.thread.x", "gpu.thread.y", "gpu.thread.z"};
            if (ir_mode_gpu(s->mode)) fprintf(out, " %s", gpu_modes[s->mode - LOOP_GPU_X]);
            if (ir_mode_flat_gpu(s->mode)) fprintf(out, "(%u thread%s)", s->threads, s->threads == 1 ? "" : "s");
            if (ir_mode_thread(s->mode) && s->thread_stride > 1) fprintf(out, " / %u", s->thread_stride);
            fputs(":\n", out);
            print_block(out, ir, &s->body, depth + 1);
            break;
        case IR_STORE:
            print_access(out, ir, s->buffer, s->index);
            fputs(" = ", out);
            print_expr(out, ir, s->value);
            if (s->nontemporal) fputs("  nontemporal", out);
            fputc('\n', out);
            break;
        case IR_SET_LOCAL:
            fprintf(out, "l%u = ", s->local);
            print_expr(out, ir, s->value);
            fputc('\n', out);
            break;
        case IR_BARRIER:
            fputs("barrier", out);
            if (s->await_copies) fprintf(out, " after copies, %u group%s in flight", s->copies_in_flight, s->copies_in_flight == 1 ? "" : "s");
            fputs(s->fence_async ? ", shared stores fenced for the async proxy\n" : "\n", out);
            break;
        case IR_MMA: {
            const IrMma *m = &s->mma;
            const char *c = ir->buffers[m->c].name;
            fprintf(out, "mma.m16n8k%u.%s %s[%u..%u] = %s[%u..] * %s[%u..] + %s[%u..%u]  (each of %u warps)\n",
                    ir_mma_k(m->in), m->in == DTYPE_F32 ? "tf32" : ir_dtype_word(m->in), c, m->c_at, m->c_at + 3,
                    ir->buffers[m->a].name, m->a_at, ir->buffers[m->b].name, m->b_at, c, m->c_at, m->c_at + 3, m->warps);
            break;
        }
        case IR_LDMATRIX: {
            const IrLdmatrix *l = &s->ldmatrix;
            unsigned per = 4 / ir_dtype_bytes(ir->buffers[l->panel].dtype);
            fprintf(out, "ldmatrix.x%u%s %s[%u..%u] = %s[%" PRId64 " + %" PRId64 "·zi + %" PRId64 "·zj + %" PRId64
                         "·row + %" PRId64 "·m0 + %" PRId64 "·m1]  (each of %u warps, %u a row)\n",
                    l->matrices, l->trans ? ".trans" : "", ir->buffers[l->regs].name, l->regs_at, l->regs_at + per * l->matrices - 1,
                    ir->buffers[l->panel].name, l->at, l->warp_row, l->warp_col, l->row, l->matrix[0], l->matrix[1], l->warps,
                    l->warps_j);
            break;
        }
        case IR_WGMMA: {
            const IrWgmma *w = &s->wgmma;
            const IrCoreLayout *la = &w->a_layout, *lb = &w->b_layout;
            fprintf(out, "wgmma.m%un%uk%u.%s %s[%u..%u] += %s[%" PRId64 ", %s%s, leading %" PRId64 ", stride %" PRId64 "] * %s[%" PRId64
                         ", %s%s, leading %" PRId64 ", stride %" PRId64 "]  (%s%s)\n",
                    w->rows, w->n, w->steps, w->in == DTYPE_F32 ? "tf32" : ir_dtype_word(w->in), ir->buffers[w->c].name, w->c_at,
                    w->c_at + w->rows * w->n / (128 * (w->warpgroups ? w->warpgroups : 1)) - 1,
                    ir->buffers[w->a].name, la->at, la->mn_major ? "m-major" : "k-major", swizzle_word(la->swizzle),
                    la->leading, la->stride, ir->buffers[w->b].name, lb->at, lb->mn_major ? "n-major" : "k-major",
                    swizzle_word(lb->swizzle), lb->leading, lb->stride, w->warpgroups > 1 ? "2 warpgroups" : "one warpgroup",
                    w->in_flight ? ", left running" : "");
            break;
        }
        case IR_CALL: {
            const IrAction *a = &ir->actions[s->action];
            fprintf(out, "call %s (", a->kind == IRA_REDUCE         ? "mean_across_processes"
                                      : a->kind == IRA_REDUCE_BEGIN ? "mean_across_processes_begin"
                                      : a->kind == IRA_REDUCE_END   ? "mean_across_processes_end"
                                                                    : "action");
            for (uint32_t k = 0; k < a->buffer_count; k++)
                fprintf(out, "%s%s", k ? ", " : "", ir->buffers[a->buffers[k]].name);
            fputs(")\n", out);
            break;
        }
        }
    }
}

void ir_dump(const IrProgram *ir, FILE *out) {
    fputs("buffers:\n", out);
    for (uint32_t i = 0; i < ir->buffer_count; i++) {
        const IrBuffer *b = &ir->buffers[i];
        if (b->is_virtual) continue;
        fprintf(out, "  %s : %s  %s%s", b->name, b->shape_text, buffer_kinds[b->kind], b->kernel_local ? " local" : "");
        if (b->dtype != DTYPE_F32) fprintf(out, " %s", ir_dtype_word(b->dtype));
        if (b->prefetch_cells) fprintf(out, " prefetch %u", b->prefetch_cells);
        fprintf(out, " [");
        for (uint32_t a = 0; a < b->rank; a++) {
            if (a) fputs(", ", out);
            print_size(out, ir, b->dims[a]);
        }
        fputc(']', out);
        switch (b->init) {
        case INIT_NONE: break;
        case INIT_FILL: fputs(" fill ", out); print_number(out, b->fill); break;
        case INIT_VALUES: fputs(" values", out); break;
        case INIT_IOTA: fputs(" iota", out); break;
        case INIT_UNIFORM:
            fputs(" uniform(", out);
            print_number(out, b->init_shift - b->fill);
            fputs(", ", out);
            print_number(out, b->init_shift + b->fill);
            fputc(')', out);
            break;
        case INIT_NORMAL:
            fputs(" normal(", out);
            print_number(out, b->init_shift);
            fputs(", ", out);
            print_number(out, b->fill);
            fputc(')', out);
            break;
        }
        fputc('\n', out);
    }
    for (uint32_t f = 0; f < ir->function_count; f++) {
        fprintf(out, "\nfunction %s:\n", ir->functions[f].name);
        print_block(out, ir, &ir->functions[f].body, 1);
    }
}

/* ---- The verifier ------------------------------------------------------------------------------ */

typedef struct Verifier {
    const IrProgram *ir;
    FILE *out;
    unsigned problems;
    const IrFunction *fn;
    bool *in_scope;      /* iterators bound by an enclosing loop */
    uint64_t *extent;
    bool *local_set;
    bool gpu_allowed;    /* a GPU loop may stand here: at a function's top level, in a GPU loop */
    bool in_block;       /* inside the block loops of a block's kernel */
    bool in_thread[3];   /* inside a thread loop of that dimension */
    uint32_t split[3];   /* the thread_stride of that loop (an inner one must cover it exactly) */
} Verifier;

static void problem(Verifier *v, const char *what) {
    v->problems++;
    fprintf(v->out, "ir verifier: function %s: %s\n", v->fn->name, what);
}

static void verify_expr(Verifier *v, const IrExpr *e);

/* Whether e is what lowering makes a gathered axis's position (lower.c access_index): a load of
 * an i32 (or u8, bool) buffer, or to_i32 of a load of numbers, of a symbol, or of an i64 load held
 * to i32's range (max (min x hi) lo). */
static bool gathered_source(const IrExpr *e) {
    if (e->kind == IR_LOAD) return true;
    if (e->kind != IR_OP || e->op != SOP_TO_I32) return false;
    const IrExpr *x = e->args[0];
    if (x->kind == IR_OP && x->op == SOP_MAX && x->args[0]->kind == IR_OP && x->args[0]->op == SOP_MIN)
        x = x->args[0]->args[0];
    return x->kind == IR_LOAD || x->kind == IR_SYMBOL;
}

/* `numbering`: a random draw's index (IR_RANDOM reads no memory, so its buffer may be virtual). */
static void verify_index(Verifier *v, uint32_t buffer, const IrIndex *index, bool numbering) {
    if (buffer >= v->ir->buffer_count) {
        problem(v, "access to a buffer that does not exist");
        return;
    }
    const IrBuffer *b = &v->ir->buffers[buffer];
    if (b->is_virtual && !numbering) problem(v, "access to a virtual buffer");
    for (uint32_t a = 0; a < b->rank; a++) {
        const IrIndex *ix = &index[a];
        int64_t lo = ix->offset, hi = ix->offset;
        for (uint32_t t = 0; t < ix->term_count; t++) {
            uint32_t it = ix->terms[t].iter;
            if (it >= v->fn->iter_count || !v->in_scope[it]) {
                problem(v, "an index uses an iterator outside its loop");
                return;
            }
            int64_t span = ix->terms[t].coef * (int64_t)(v->extent[it] - 1);
            if (span < 0) lo += span;
            else hi += span;
        }
        if (ix->gather) { /* clamped to the axis where it is read (docs/ir.md §2.8) */
            if (ix->term_count || ix->symbol || ix->offset) problem(v, "a gathered axis has terms of its own");
            if (!gathered_source(ix->gather))
                problem(v, "a gathered axis reads an expression that is not an i32 load or a conversion of a load, a "
                        "symbol or a clamped i64 load");
            verify_expr(v, ix->gather);
            continue;
        }
        if (ix->symbol) continue; /* checked at run time against the symbol's range */
        if (lo < 0 || hi >= (int64_t)b->dims[a]) problem(v, "an index can leave its axis");
    }
}

/* Whether values of types a and b may meet without a conversion: the 8-byte types (f64, i64)
 * only with themselves, the 4-byte ones with each other (an i32's bits travel in a float). */
static bool same_width(DType a, DType b) { return ir_dtype_wide(a) || ir_dtype_wide(b) ? a == b : true; }

static void verify_expr(Verifier *v, const IrExpr *e) {
    switch (e->kind) {
    case IR_CONST:
    case IR_SYMBOL: break;
    case IR_LOAD:
    case IR_RANDOM: verify_index(v, e->buffer, e->index, e->kind == IR_RANDOM); break;
    case IR_LOCAL:
        if (e->local >= v->fn->local_count || !v->local_set[e->local]) problem(v, "a local is read before it is set");
        break;
    case IR_OP:
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) {
            if (!e->args[i]) {
                problem(v, "an operation lacks an operand");
                return;
            }
            verify_expr(v, e->args[i]);
            if (!scalar_op_conversion(e->op) && !same_width(ir_expr_type(v->ir, e->args[i]), e->type))
                problem(v, "an operation mixes f64 or i64 and other values without a conversion");
        }
        break;
    }
}

int64_t ir_flat_coef(const IrProgram *ir, uint32_t buffer, const IrIndex *index, uint32_t iter) {
    const IrBuffer *b = &ir->buffers[buffer];
    int64_t coef = 0, stride = 1;
    for (uint32_t a = b->rank; a-- > 0;) {
        for (uint32_t t = 0; t < index[a].term_count; t++)
            if (index[a].terms[t].iter == iter) coef += index[a].terms[t].coef * stride;
        stride *= (int64_t)b->dims[a];
    }
    return coef;
}

/* LOOP_ASYNC_COPY (ir.h): one store into a shared buffer of a load of a device buffer of
 * its type, inside a thread loop, a run of neighbouring cells that cp.async can copy. */
static void verify_async_copy(Verifier *v, const IrStmt *s) {
    const IrStmt *st = s->body.count == 1 ? s->body.items[0] : NULL;
    const IrExpr *src = st && st->kind == IR_STORE ? st->value : NULL;
    const IrBuffer *to = st && st->kind == IR_STORE ? &v->ir->buffers[st->buffer] : NULL;
    if (!src || src->kind != IR_LOAD || !to->gpu_shared || v->ir->buffers[src->buffer].gpu_shared ||
        v->ir->buffers[src->buffer].kernel_local || v->ir->buffers[src->buffer].dtype != to->dtype) {
        problem(v, "an async_copy loop holds more than a copy from a device buffer into a shared one");
        return;
    }
    uint64_t bytes = s->extent * ir_dtype_bytes(to->dtype);
    if (ir_flat_coef(v->ir, st->buffer, st->index, s->iter) != 1 || ir_flat_coef(v->ir, src->buffer, src->index, s->iter) != 1 ||
        !(bytes == 4 || bytes == 8 || bytes % 16 == 0))
        problem(v, "an async_copy loop's run is not 4, 8 or a multiple of 16 bytes of neighbouring cells");
    if (to->swizzle && (bytes % 16 || to->rank != 1 || st->index->gather || st->index->symbol))
        problem(v, "an async_copy loop into a swizzled panel copies other than whole 16-byte units along its one axis");
    if (!v->in_thread[0] && !v->in_thread[1] && !v->in_thread[2]) problem(v, "an async_copy loop outside the thread loops");
}

/* Whether the verifier stands between the phases of a block's kernel (where a barrier, a
 * tensor-core product and an ldmatrix stand). */
static bool between_phases(const Verifier *v) {
    return v->in_block && !v->in_thread[0] && !v->in_thread[1] && !v->in_thread[2];
}

/* IR_LDMATRIX (ir.h): every lane's row within the panel and 16-byte aligned, the registers a
 * thread's of the panel's type. */
static void verify_ldmatrix(Verifier *v, const IrLdmatrix *l) {
    if (!between_phases(v)) problem(v, "an ldmatrix outside the phases of a block's kernel");
    const IrBuffer *p = l->panel < v->ir->buffer_count ? &v->ir->buffers[l->panel] : NULL;
    const IrBuffer *r = l->regs < v->ir->buffer_count ? &v->ir->buffers[l->regs] : NULL;
    if (!p || !p->gpu_shared || p->swizzle || !r || !r->thread_cells || r->dtype != p->dtype || ir_dtype_bytes(p->dtype) > 4 ||
        ir_dtype_bytes(p->dtype) < 2 || (l->trans && ir_dtype_bytes(p->dtype) != 2)) {
        problem(v, "an ldmatrix's panel is not an unswizzled shared buffer of 2- or 4-byte cells (2 with trans) or its registers not a thread's of its type");
        return;
    }
    int64_t cell = ir_dtype_bytes(p->dtype), run = 16 / cell, per = 4 / cell;
    if ((l->matrices != 1 && l->matrices != 2 && l->matrices != 4) || l->warps < 1 || l->warps > 32 || !l->warps_j ||
        l->warps % l->warps_j || l->regs_at + (uint64_t)per * l->matrices > r->thread_cells ||
        r->size < (uint64_t)32 * l->warps * r->thread_cells) {
        problem(v, "an ldmatrix of another number of matrices, warps or registers");
        return;
    }
    /* Each coefficient scales a number from 0 up; the lowest and highest cells named. */
    const int64_t coef[5] = {l->warp_row, l->warp_col, l->row, l->matrix[0], l->matrix[1]};
    const int64_t most[5] = {l->warps / l->warps_j - 1, l->warps_j - 1, 7, l->matrices > 1, l->matrices > 2};
    int64_t lo = l->at, hi = l->at, aligned = l->at % run;
    for (int k = 0; k < 5; k++) {
        if (coef[k] < 0) lo += coef[k] * most[k];
        else hi += coef[k] * most[k];
        if (most[k]) aligned |= coef[k] % run;
    }
    if (lo < 0 || (uint64_t)(hi + run) > p->size || aligned)
        problem(v, "an ldmatrix's rows are not 16-byte aligned runs inside its panel");
}

/* The cells an IR_WGMMA operand reads lie inside its panel, 16-byte aligned core matrices; a
 * swizzled layout's in a panel of the same swizzle, its rows whole and each group of 8 on the
 * swizzle's period (ir.h IrCoreLayout). */
static bool core_panel_fits(const IrBuffer *p, const IrCoreLayout *l, uint32_t rows, uint32_t steps) {
    if (!p->gpu_shared || p->swizzle != l->swizzle || l->bytes != ir_dtype_bytes(p->dtype) || (l->bytes == 4 && l->mn_major))
        return false;
    int64_t unit = 16 / l->bytes; /* a core matrix row's cells */
    if (l->at < 0 || l->leading < 0 || l->stride < 0 || l->at % unit || l->leading % unit || l->stride % unit) return false;
    if (l->swizzle) {
        int64_t cells = l->swizzle / l->bytes, period = 8 * cells; /* a row's cells, 8 rows' */
        if ((l->swizzle != 32 && l->swizzle != 64 && l->swizzle != 128) || p->size % (uint64_t)period || l->at % period ||
            l->stride % period || (l->mn_major ? rows % cells || l->leading % period : steps > cells))
            return false;
    }
    /* (rows and steps are whole core matrices or rows: the last row's last step is the furthest) */
    return (uint64_t)ir_core_cell(l, rows - 1, steps - 1) < p->size;
}

/* IR_WGMMA (ir.h): one warpgroup's registers, panels that hold what the layouts name. */
static void verify_wgmma(Verifier *v, const IrWgmma *w) {
    if (!between_phases(v)) problem(v, "a warpgroup product outside the phases of a block's kernel");
    const IrBuffer *bufs = v->ir->buffers;
    uint32_t count = v->ir->buffer_count;
    if ((!ir_dtype_half(w->in) && w->in != DTYPE_F32) || (w->rows != 64 && w->rows != 128) || (w->warpgroups != 1 && w->warpgroups != 2) ||
        w->rows / w->warpgroups < 64 || !w->n || w->n % 8 || w->n > 256 || !w->steps ||
        w->steps % 16 || w->in_flight > 1 || w->a >= count || w->b >= count || w->c >= count) {
        problem(v, "a warpgroup product of another type or shape");
        return;
    }
    if (bufs[w->a].dtype != w->in || bufs[w->b].dtype != w->in || !core_panel_fits(&bufs[w->a], &w->a_layout, w->rows, w->steps) ||
        !core_panel_fits(&bufs[w->b], &w->b_layout, w->n, w->steps))
        problem(v, "a warpgroup product's panels are not shared buffers of its type holding its core matrices");
    const IrBuffer *c = &bufs[w->c];
    if (!c->thread_cells || c->dtype != DTYPE_F32 || w->c_at + (uint64_t)w->rows * w->n / (128 * w->warpgroups) > c->thread_cells ||
        c->size < (uint64_t)128 * w->warpgroups * c->thread_cells)
        problem(v, "a warpgroup product's registers are not a thread's f32 registers");
}

static void verify_block(Verifier *v, const IrBlock *block) {
    for (uint32_t i = 0; i < block->count; i++) {
        const IrStmt *s = block->items[i];
        switch (s->kind) {
        case IR_LOOP:
            if (s->iter >= v->fn->iter_count || v->in_scope[s->iter]) {
                problem(v, "a loop rebinds an iterator");
                break;
            }
            if (s->extent < 1) problem(v, "a loop has no iterations");
            bool blocks = s->mode == LOOP_BLOCKS;
            if (size_is_runtime(s->extent) && s->mode != LOOP_PLAIN && !blocks)
                problem(v, "a loop of run-time extent is not a plain loop");
            if (s->mode == LOOP_ASYNC_COPY) verify_async_copy(v, s);
            if (s->mode == LOOP_DOT_PAIRS && (s->local >= v->fn->local_count || !v->local_set[s->local]))
                problem(v, "a dot_pairs loop's guard local is not set before it");
            if (blocks && (s->block < 1 || s->block_symbol >= v->ir->symbol_count))
                problem(v, "a loop of blocks has no block or no symbol");
            if (ir_mode_thread(s->mode)) {
                if (!s->parallel) problem(v, "a GPU loop is a reduction");
                if (!v->in_block) problem(v, "a thread loop outside the block loops of a kernel");
                unsigned d = s->mode - LOOP_THREAD_X;
                uint64_t stride = s->thread_stride > 1 ? s->thread_stride : 1;
                if (v->in_thread[d] && (v->split[d] != s->extent || stride != 1))
                    problem(v, "a thread loop inside one of its dimension that does not split it");
                if (stride > 1 && (s->body.count != 1 || s->body.items[0]->kind != IR_LOOP ||
                                   s->body.items[0]->mode != s->mode || s->body.items[0]->extent != stride))
                    problem(v, "a thread loop that splits its dimension holds more than the loop inside it");
                if (s->extent * stride > 1024) problem(v, "a thread loop of more than 1024 threads");
            } else if (ir_mode_block(s->mode)) {
                if (!s->parallel) problem(v, "a GPU loop is a reduction");
                if (!v->gpu_allowed) problem(v, "a GPU loop inside a loop that is not one");
                if (s->mode != LOOP_BLOCK_X && s->extent > 65535) problem(v, "a gpu.block.y or gpu.block.z loop past 65535 blocks");
            } else if (ir_mode_flat_gpu(s->mode)) {
                if (!s->parallel) problem(v, "a GPU loop is a reduction");
                if (!v->gpu_allowed) problem(v, "a GPU loop inside a loop that is not one");
                if (s->threads < 1 || s->threads > 1024) problem(v, "a GPU loop without 1 to 1024 threads a block");
                else if (s->mode != LOOP_GPU_X && (s->extent + s->threads - 1) / s->threads > 65535)
                    problem(v, "a gpu.y or gpu.z loop past 65535 blocks");
            }
            bool outer_allowed = v->gpu_allowed, outer_block = v->in_block, outer_thread = false;
            v->gpu_allowed = ir_mode_flat_gpu(s->mode) || ir_mode_block(s->mode);
            if (ir_mode_block(s->mode)) {
                v->in_block = true;
            }
            uint32_t outer_split = 0;
            if (ir_mode_thread(s->mode)) {
                outer_thread = v->in_thread[s->mode - LOOP_THREAD_X];
                outer_split = v->split[s->mode - LOOP_THREAD_X];
                v->in_thread[s->mode - LOOP_THREAD_X] = true;
                v->split[s->mode - LOOP_THREAD_X] = s->thread_stride > 1 ? s->thread_stride : 0;
            }
            v->in_scope[s->iter] = true;
            v->extent[s->iter] = s->extent;
            verify_block(v, &s->body);
            v->in_scope[s->iter] = false;
            v->gpu_allowed = outer_allowed;
            v->in_block = outer_block;
            if (ir_mode_thread(s->mode)) {
                v->in_thread[s->mode - LOOP_THREAD_X] = outer_thread;
                v->split[s->mode - LOOP_THREAD_X] = outer_split;
            }
            break;
        case IR_STORE:
            verify_expr(v, s->value);
            verify_index(v, s->buffer, s->index, false);
            if (s->buffer < v->ir->buffer_count &&
                !same_width(ir_dtype_compute(v->ir->buffers[s->buffer].dtype), ir_expr_type(v->ir, s->value))) {
                char what[256];
                snprintf(what, sizeof what, "a store into %s (%s) of a value of type %s", v->ir->buffers[s->buffer].name,
                         ir_dtype_word(v->ir->buffers[s->buffer].dtype), ir_dtype_word(ir_expr_type(v->ir, s->value)));
                problem(v, what);
            }
            if (s->buffer < v->ir->buffer_count && v->ir->buffers[s->buffer].thread_cells && !v->in_thread[0])
                problem(v, "a per-thread buffer stored outside the thread loops");
            if (s->buffer < v->ir->buffer_count && v->ir->buffers[s->buffer].kind != BUF_COMPUTED &&
                v->ir->buffers[s->buffer].kind != BUF_PARAM && v->ir->buffers[s->buffer].kind != BUF_SCRATCH)
                problem(v, "a store to a buffer that only the program's inputs fill");
            break;
        case IR_SET_LOCAL:
            verify_expr(v, s->value);
            if (s->local >= v->fn->local_count) problem(v, "a local out of range");
            else v->local_set[s->local] = true;
            break;
        case IR_BARRIER:
            if (!between_phases(v)) problem(v, "a barrier outside the phases of a block's kernel");
            break;
        case IR_LDMATRIX: verify_ldmatrix(v, &s->ldmatrix); break;
        case IR_WGMMA: verify_wgmma(v, &s->wgmma); break;
        case IR_MMA: {
            const IrMma *m = &s->mma;
            if (!between_phases(v)) problem(v, "a tensor-core product outside the phases of a block's kernel");
            if ((!ir_dtype_half(m->in) && m->in != DTYPE_F32) || m->warps < 1 || m->warps > 32)
                problem(v, "a tensor-core product of another type or block");
            const uint32_t regs[3][3] = {
                {m->a, m->a_at, ir_mma_a_registers(m->in)}, {m->b, m->b_at, ir_mma_b_registers(m->in)}, {m->c, m->c_at, 4}};
            for (int k = 0; k < 3; k++) { /* A and B of the operands' type (f32 for tf32), C f32 */
                const IrBuffer *b = regs[k][0] < v->ir->buffer_count ? &v->ir->buffers[regs[k][0]] : NULL;
                DType want = k < 2 ? m->in : DTYPE_F32;
                if (!b || !b->thread_cells || b->dtype != want || regs[k][1] + regs[k][2] > b->thread_cells ||
                    b->size < (uint64_t)32 * m->warps * b->thread_cells)
                    problem(v, "a tensor-core product's registers are not a thread's registers of its types");
            }
            break;
        }
        case IR_CALL:
            if (block != &v->fn->body) problem(v, "a call of the runtime inside a loop");
            else if (s->action >= v->ir->action_count || (v->ir->actions[s->action].kind != IRA_REDUCE &&
                                                          v->ir->actions[s->action].kind != IRA_REDUCE_BEGIN &&
                                                          v->ir->actions[s->action].kind != IRA_REDUCE_END))
                problem(v, "a call of an action that is not a routine's");
            else
                for (uint32_t k = 0; k < v->ir->actions[s->action].buffer_count; k++)
                    if (v->ir->actions[s->action].buffers[k] >= v->ir->buffer_count ||
                        v->ir->buffers[v->ir->actions[s->action].buffers[k]].is_virtual)
                        problem(v, "a call of the runtime on a buffer without storage");
            break;
        }
    }
}

unsigned ir_verify(const IrProgram *ir, FILE *out) {
    Verifier v = {.ir = ir, .out = out};
    for (uint32_t f = 0; f < ir->function_count; f++) {
        const IrFunction *fn = &ir->functions[f];
        v.fn = fn;
        v.in_scope = calloc(fn->iter_count + 1, sizeof *v.in_scope);
        v.extent = calloc(fn->iter_count + 1, sizeof *v.extent);
        v.local_set = calloc(fn->local_count + 1, sizeof *v.local_set);
        if (!v.in_scope || !v.extent || !v.local_set) diag_fatal_oom();
        v.gpu_allowed = true;
        verify_block(&v, &fn->body);
        free(v.in_scope);
        free(v.extent);
        free(v.local_set);
    }
    return v.problems;
}

bool ir_index_loads(const IrProgram *ir, uint32_t indexed, const IrIndex *index, uint32_t buffer) {
    for (uint32_t a = 0; a < ir->buffers[indexed].rank; a++)
        if (index[a].gather && ir_expr_loads(ir, index[a].gather, buffer)) return true;
    return false;
}

void ir_index_each_load(const IrProgram *ir, uint32_t indexed, const IrIndex *index,
                        void (*visit)(void *ctx, uint32_t buffer), void *ctx) {
    for (uint32_t a = 0; a < ir->buffers[indexed].rank; a++)
        if (index[a].gather) ir_expr_each_load(ir, index[a].gather, visit, ctx);
}

void ir_expr_each_load(const IrProgram *ir, const IrExpr *e, void (*visit)(void *ctx, uint32_t buffer), void *ctx) {
    if (e->kind == IR_LOAD) {
        visit(ctx, e->buffer);
        ir_index_each_load(ir, e->buffer, e->index, visit, ctx);
    } else if (e->kind == IR_OP) {
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) ir_expr_each_load(ir, e->args[i], visit, ctx);
    }
}

bool ir_expr_loads(const IrProgram *ir, const IrExpr *e, uint32_t buffer) {
    if (e->kind == IR_LOAD) return e->buffer == buffer || ir_index_loads(ir, e->buffer, e->index, buffer);
    if (e->kind != IR_OP) return false;
    for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
        if (ir_expr_loads(ir, e->args[i], buffer)) return true;
    return false;
}

static bool rename_expr_loads(IrExpr *e, uint32_t from, uint32_t to) {
    if (e->kind == IR_LOAD && e->buffer == from) {
        e->buffer = to;
        return true;
    }
    bool renamed = false;
    if (e->kind == IR_OP)
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) renamed |= rename_expr_loads(e->args[i], from, to);
    return renamed;
}

bool ir_rename_loads(IrStmt *st, uint32_t from, uint32_t to) {
    bool renamed = false;
    if (st->kind == IR_LOOP)
        for (uint32_t i = 0; i < st->body.count; i++) renamed |= ir_rename_loads(st->body.items[i], from, to);
    else if (st->kind == IR_STORE || st->kind == IR_SET_LOCAL)
        renamed = rename_expr_loads(st->value, from, to);
    return renamed;
}

static bool index_gathers(const IrProgram *ir, uint32_t buffer, const IrIndex *index) {
    for (uint32_t a = 0; a < ir->buffers[buffer].rank; a++)
        if (index[a].gather) return true;
    return false;
}

bool ir_expr_gathers(const IrProgram *ir, const IrExpr *e) {
    if (e->kind == IR_LOAD) return index_gathers(ir, e->buffer, e->index);
    if (e->kind != IR_OP) return false;
    for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
        if (ir_expr_gathers(ir, e->args[i])) return true;
    return false;
}

static bool expr_integer(const IrExpr *e) {
    if (e->kind != IR_OP) return false;
    if ((e->type == DTYPE_I32 || e->type == DTYPE_I64) && !scalar_op_conversion(e->op)) return true;
    for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
        if (expr_integer(e->args[i])) return true;
    return false;
}

bool ir_stmt_integer(const IrStmt *s) {
    if (s->kind == IR_LOOP) {
        for (uint32_t i = 0; i < s->body.count; i++)
            if (ir_stmt_integer(s->body.items[i])) return true;
        return false;
    }
    return s->kind != IR_BARRIER && s->kind != IR_CALL && expr_integer(s->value);
}

bool ir_call_touches(const IrProgram *ir, const IrStmt *s, uint32_t buffer) {
    if (s->kind != IR_CALL) return false;
    for (uint32_t k = 0; k < ir->actions[s->action].buffer_count; k++)
        if (ir->actions[s->action].buffers[k] == buffer) return true;
    return false;
}

bool ir_stmt_writes(const IrProgram *ir, const IrStmt *s, uint32_t buffer) {
    switch (s->kind) {
    case IR_STORE: return s->buffer == buffer;
    case IR_CALL: return ir_call_touches(ir, s, buffer);
    case IR_LOOP:
        for (uint32_t i = 0; i < s->body.count; i++)
            if (ir_stmt_writes(ir, s->body.items[i], buffer)) return true;
        return false;
    default: return false;
    }
}

DType ir_expr_type(const IrProgram *ir, const IrExpr *e) {
    return e->kind == IR_LOAD ? (DType)ir_dtype_compute(ir->buffers[e->buffer].dtype) : e->type;
}

/* Whether a statement touches element types of a set: a buffer whose type is in `cells` (bits
 * 1 << DTYPE_*) loaded or stored, or a value whose type is in `values`, anywhere in it (gathered
 * indices included).  ir_stmt_f64 and ir_stmt_half ask it. */
typedef struct TypeSet {
    unsigned cells, values;
} TypeSet;

static bool index_touches(const IrProgram *ir, TypeSet set, const IrIndex *index, uint32_t rank);

static bool expr_touches(const IrProgram *ir, TypeSet set, const IrExpr *e) {
    if (set.values & 1u << ir_expr_type(ir, e)) return true;
    if (e->kind == IR_LOAD)
        return (set.cells & 1u << ir->buffers[e->buffer].dtype) || index_touches(ir, set, e->index, ir->buffers[e->buffer].rank);
    if (e->kind != IR_OP) return false;
    for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
        if (expr_touches(ir, set, e->args[i])) return true;
    return false;
}

static bool index_touches(const IrProgram *ir, TypeSet set, const IrIndex *index, uint32_t rank) {
    for (uint32_t a = 0; a < rank; a++)
        if (index[a].gather && expr_touches(ir, set, index[a].gather)) return true;
    return false;
}

static bool stmt_touches(const IrProgram *ir, TypeSet set, const IrStmt *s) {
    switch (s->kind) {
    case IR_LOOP:
        for (uint32_t i = 0; i < s->body.count; i++)
            if (stmt_touches(ir, set, s->body.items[i])) return true;
        return false;
    case IR_STORE:
        return (set.cells & 1u << ir->buffers[s->buffer].dtype) || expr_touches(ir, set, s->value) ||
               index_touches(ir, set, s->index, ir->buffers[s->buffer].rank);
    case IR_SET_LOCAL: return expr_touches(ir, set, s->value);
    case IR_BARRIER:
    case IR_MMA: /* a block kernel's registers */
    case IR_LDMATRIX:
    case IR_WGMMA:
    case IR_CALL: return false;
    }
    return false;
}

bool ir_stmt_half(const IrProgram *ir, const IrStmt *s) {
    return stmt_touches(ir, (TypeSet){1u << DTYPE_BF16 | 1u << DTYPE_F16, 0}, s);
}

bool ir_stmt_f64(const IrProgram *ir, const IrStmt *s) { return stmt_touches(ir, (TypeSet){1u << DTYPE_F64, 1u << DTYPE_F64}, s); }

bool ir_stmt_untiled_types(const IrProgram *ir, const IrStmt *s) {
    return stmt_touches(ir, (TypeSet){1u << DTYPE_U8 | 1u << DTYPE_BOOL | 1u << DTYPE_I64, 1u << DTYPE_I64}, s);
}

bool ir_stmt_as_lowered(const IrProgram *ir, const IrStmt *s) {
    return s->kind == IR_CALL || ir_stmt_gathers(ir, s) || ir_stmt_integer(s) || ir_stmt_half(ir, s) ||
           ir_stmt_untiled_types(ir, s);
}

bool ir_stmt_gathers(const IrProgram *ir, const IrStmt *s) {
    switch (s->kind) {
    case IR_LOOP:
        for (uint32_t i = 0; i < s->body.count; i++)
            if (ir_stmt_gathers(ir, s->body.items[i])) return true;
        return false;
    case IR_STORE: return index_gathers(ir, s->buffer, s->index) || ir_expr_gathers(ir, s->value);
    case IR_SET_LOCAL: return ir_expr_gathers(ir, s->value);
    case IR_BARRIER:
    case IR_MMA:
    case IR_LDMATRIX:
    case IR_WGMMA:
    case IR_CALL: return false;
    }
    return false;
}

bool ir_expr_random(const IrExpr *e) {
    if (e->kind == IR_RANDOM) return true;
    if (e->kind != IR_OP) return false;
    for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
        if (ir_expr_random(e->args[i])) return true;
    return false;
}

bool ir_expr_reads_local(const IrExpr *e) {
    if (e->kind == IR_LOCAL) return true;
    if (e->kind != IR_OP) return false;
    for (unsigned i = 0; i < scalar_op_arity(e->op); i++)
        if (ir_expr_reads_local(e->args[i])) return true;
    return false;
}

uint32_t ir_random_site(const IrBuffer *buffer) {
    uint32_t h = 2166136261u;
    for (const char *s = buffer->name; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

bool ir_same_index(const IrProgram *ir, uint32_t buffer, const IrIndex *a, const IrIndex *b) {
    for (uint32_t k = 0; k < ir->buffers[buffer].rank; k++) {
        if (a[k].offset != b[k].offset || a[k].term_count != b[k].term_count || a[k].symbol != b[k].symbol) return false;
        if (a[k].gather || b[k].gather) return false; /* the same only where the data says so */
        for (uint32_t t = 0; t < a[k].term_count; t++)
            if (a[k].terms[t].iter != b[k].terms[t].iter || a[k].terms[t].coef != b[k].terms[t].coef) return false;
    }
    return true;
}

/* ---- Run-time sizes a function needs ------------------------------------------------------------ */

static void mark_size(const IrProgram *ir, bool *need, uint64_t n) {
    if (size_is_runtime(n)) need[ir->class_symbol[size_class(n)]] = true;
}

static void mark_buffer(const IrProgram *ir, bool *need, uint32_t buffer) {
    const IrBuffer *b = &ir->buffers[buffer];
    if (ir_buffer_dynamic(b)) need[b->size_symbol] = true;
}

static void sizes_of_expr(const IrProgram *ir, bool *need, const IrExpr *e) {
    if (e->kind == IR_LOAD) {
        mark_buffer(ir, need, e->buffer);
        for (uint32_t a = 0; a < ir->buffers[e->buffer].rank; a++)
            if (e->index[a].gather) sizes_of_expr(ir, need, e->index[a].gather);
    }
    if (e->kind == IR_SYMBOL) { /* `dim b` of a run-time size */
        uint32_t s = ir_symbol(ir, e->symbol);
        if (s != UINT32_MAX && ir->symbols[s].size) need[s] = true;
    }
    if (e->kind == IR_OP)
        for (unsigned i = 0; i < scalar_op_arity(e->op); i++) sizes_of_expr(ir, need, e->args[i]);
}

static void sizes_of_block(const IrProgram *ir, bool *need, const IrBlock *block) {
    for (uint32_t i = 0; i < block->count; i++) {
        const IrStmt *s = block->items[i];
        switch (s->kind) {
        case IR_LOOP:
            mark_size(ir, need, s->extent);
            sizes_of_block(ir, need, &s->body);
            break;
        case IR_STORE:
            mark_buffer(ir, need, s->buffer);
            for (uint32_t a = 0; a < ir->buffers[s->buffer].rank; a++)
                if (s->index[a].gather) sizes_of_expr(ir, need, s->index[a].gather);
            sizes_of_expr(ir, need, s->value);
            break;
        case IR_SET_LOCAL: sizes_of_expr(ir, need, s->value); break;
        case IR_BARRIER:
        case IR_MMA:
        case IR_LDMATRIX:
        case IR_WGMMA: break;
        case IR_CALL:
            for (uint32_t k = 0; k < ir->actions[s->action].buffer_count; k++)
                mark_buffer(ir, need, ir->actions[s->action].buffers[k]);
            break;
        }
    }
}

uint32_t ir_function_sizes(const IrProgram *ir, const IrFunction *fn, uint32_t *out) {
    bool *need = calloc(ir->symbol_count + 1, sizeof *need);
    if (!need) diag_fatal_oom();
    sizes_of_block(ir, need, &fn->body);
    uint32_t n = 0;
    for (uint32_t i = 0; i < ir->symbol_count; i++)
        if (need[i]) out[n++] = i;
    free(need);
    return n;
}
