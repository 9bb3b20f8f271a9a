; avx512_slp_repro.ll: LLVM 19's SLP vectorizer miscompiles straight-line float code.
;
; What it is.  @kernel is what an einsum nest of tsrc looks like after full unrolling (it was
; reduced with llvm-reduce-19 from `x0 +* "a, f, d; c, t => a, d, t, f, c" x1`, x0 : 2,4,2 and
; x1 : 3,4, the pre-SLP IR of the -O3 pipeline for --cpu=x86-64-v4; see docs/notes/llvm19-slp-miscompile.md):
; 24 consecutive float stores out[9..32], each the product of two loaded scalars, the x operand
; repeating with period 3 along the store chain and the w operand constant over runs of 3.
; The input is well defined: three noalias buffers, no overlap, no undef or poison.
;
; The bug.  `opt -passes=slp-vectorizer` for an AVX-512 CPU (x86-64-v4, skylake-avx512,
; icelake-server, sapphirerapids) builds the two 8-wide products out[17..24] and out[25..32]
; from gathered operand vectors; for the second one it reuses lanes of the first tree's gathers
; through a two-source shufflevector whose mask leaves the lanes that should come from the
; second source as poison (e.g. `shufflevector %a, %b, <poison, poison, 2, poison, poison, 2, 3, 3>`),
; so out[25], out[26], out[28], out[29] get whatever the register held (here 102, 102, 306, 306,
; a neighbouring lane's product, instead of 1, 1, 3, 3, products of x[0]).  Not AVX-512-specific in kind: the unreduced IR goes
; wrong with the pass run for any -mcpu (x86-64 included), and sweep_regress.tsr's p3 goes wrong
; for x86-64-v3; the cost model decides when it shows (this reduced one needs AVX-512's).
; It looks like the SLP gather/reuse-shuffle bugs fixed after 19.x (e.g. llvm/llvm-project#117170,
; "SLP vectorizer produces bad shuffles"); 19.1.7, Debian's llvm-19 1:19.1.7-3~deb12u1, has it.
;
; Run (any x86-64 host; exit status 0 = right, 1 = miscompiled):
;   lli-19 tests/native/avx512_slp_repro.ll                                   # prints "ok"
;   opt-19 -mtriple=x86_64-pc-linux-gnu -mcpu=x86-64-v4 -passes=slp-vectorizer \
;          tests/native/avx512_slp_repro.ll -o /tmp/slp.bc && lli-19 /tmp/slp.bc   # "MISCOMPILED: 4 cells"
;   opt-19 ... -passes=slp-vectorizer -vectorize-slp=false ...                   # "ok" (tsrc's workaround)
;   opt-19 -mtriple=x86_64-pc-linux-gnu -mcpu=x86-64-v4 -passes=slp-vectorizer -S tests/native/avx512_slp_repro.ll
;                                       # shows the shufflevector with the poison lanes
; tests/native_sweep.sh runs the second and says (INFO) whether this LLVM still has the bug.

target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

; The reduced function (llvm-reduce output; values renamed).
define i32 @kernel(ptr noalias %x, ptr noalias %w, ptr noalias %out) {
entry:
  %w.1.p = getelementptr i8, ptr %w, i64 4
  %w1 = load float, ptr %w.1.p, align 4
  %w.5.p = getelementptr i8, ptr %w, i64 20
  %w5 = load float, ptr %w.5.p, align 4
  %w0 = load float, ptr %w, align 4
  %w.2.p = getelementptr i8, ptr %w, i64 8
  %w2 = load float, ptr %w.2.p, align 4
  %x0.a = load float, ptr %x, align 4
  %x0.b = load float, ptr %x, align 4
  %x0.c = load float, ptr %x, align 4
  %x.2.p = getelementptr i8, ptr %x, i64 8
  %x2 = load float, ptr %x.2.p, align 4
  %x.4.p = getelementptr i8, ptr %x, i64 16
  %x4 = load float, ptr %x.4.p, align 4
  %x.6.p = getelementptr i8, ptr %x, i64 24
  %x6 = load float, ptr %x.6.p, align 4
  %t6 = getelementptr i8, ptr %out, i64 36
  %t7 = fmul float 0.000000e+00, 0.000000e+00
  store float %t7, ptr %t6, align 4
  %t8 = getelementptr i8, ptr %out, i64 40
  store float %t7, ptr %t8, align 4
  %t9 = getelementptr i8, ptr %out, i64 44
  store float %t7, ptr %t9, align 4
  %t10 = getelementptr i8, ptr %out, i64 48
  %t11 = fmul float 0.000000e+00, 0.000000e+00
  store float %t11, ptr %t10, align 4
  %t12 = fmul float 0.000000e+00, 0.000000e+00
  %t13 = getelementptr i8, ptr %out, i64 52
  store float %t12, ptr %t13, align 4
  %t14 = fmul float 0.000000e+00, %x0.c
  %t15 = getelementptr i8, ptr %out, i64 56
  store float %t14, ptr %t15, align 4
  %t16 = getelementptr i8, ptr %out, i64 60
  %t17 = fmul float 0.000000e+00, 0.000000e+00
  store float %t17, ptr %t16, align 4
  %t18 = fmul float 0.000000e+00, 0.000000e+00
  %t19 = getelementptr i8, ptr %out, i64 64
  store float %t18, ptr %t19, align 4
  %t20 = fmul float %w0, %x2
  %t21 = getelementptr i8, ptr %out, i64 68
  store float %t20, ptr %t21, align 4
  %t22 = getelementptr i8, ptr %out, i64 72
  %t23 = fmul float %w1, %x4
  store float %t23, ptr %t22, align 4
  %t24 = fmul float %w5, %x4
  %t25 = getelementptr i8, ptr %out, i64 76
  store float %t24, ptr %t25, align 4
  %t26 = fmul float %w0, %x4
  %t27 = getelementptr i8, ptr %out, i64 80
  store float %t26, ptr %t27, align 4
  %t28 = getelementptr i8, ptr %out, i64 84
  %t29 = fmul float %w1, %x6
  store float %t29, ptr %t28, align 4
  %t30 = fmul float %w5, %x6
  %t31 = getelementptr i8, ptr %out, i64 88
  store float %t30, ptr %t31, align 4
  %t32 = fmul float %w0, %x6
  %t33 = getelementptr i8, ptr %out, i64 92
  store float %t32, ptr %t33, align 4
  %t34 = getelementptr i8, ptr %out, i64 96
  %t35 = fmul float %w2, %x0.c
  store float %t35, ptr %t34, align 4
  %t36 = fmul float %x0.a, %x0.c
  %t37 = getelementptr i8, ptr %out, i64 100
  store float %t36, ptr %t37, align 4
  %t38 = fmul float %x0.b, %x0.c
  %t39 = getelementptr i8, ptr %out, i64 104
  store float %t38, ptr %t39, align 4
  %t40 = getelementptr i8, ptr %out, i64 108
  %t41 = fmul float %w2, %x2
  store float %t41, ptr %t40, align 4
  %t42 = fmul float %x0.a, %x2
  %t43 = getelementptr i8, ptr %out, i64 112
  store float %t42, ptr %t43, align 4
  %t44 = fmul float %x0.b, %x2
  %t45 = getelementptr i8, ptr %out, i64 116
  store float %t44, ptr %t45, align 4
  %t46 = getelementptr i8, ptr %out, i64 120
  %t47 = fmul float %w2, %x4
  store float %t47, ptr %t46, align 4
  %t48 = fmul float %x0.a, %x4
  %t49 = getelementptr i8, ptr %out, i64 124
  store float %t48, ptr %t49, align 4
  %t50 = fmul float %x0.b, %x4
  %t51 = getelementptr i8, ptr %out, i64 128
  store float %t50, ptr %t51, align 4
  ret i32 0
}

; x[i] = i + 1, w[i] = 100 + i, out[0..32] = -1; then out[9..32] must equal @expected.
@expected = private constant [24 x float] [float 0.000000e+00, float 0.000000e+00, float 0.000000e+00, float 0.000000e+00, float 0.000000e+00, float 0.000000e+00, float 0.000000e+00, float 0.000000e+00, float 3.000000e+02, float 5.050000e+02, float 5.250000e+02, float 5.000000e+02, float 7.070000e+02, float 7.350000e+02, float 7.000000e+02, float 1.020000e+02, float 1.000000e+00, float 1.000000e+00, float 3.060000e+02, float 3.000000e+00, float 3.000000e+00, float 5.100000e+02, float 5.000000e+00, float 5.000000e+00]
@fmt.ok = private constant [4 x i8] c"ok\0A\00"
@fmt.bad = private constant [31 x i8] c"MISCOMPILED: %d cells (of 24)\0A\00"
@fmt.cell = private constant [30 x i8] c"  out[%ld] = %g, expected %g\0A\00"

declare i32 @printf(ptr, ...)

define i32 @main() {
entry:
  %x = alloca [8 x float], align 4
  %w = alloca [8 x float], align 4
  %out = alloca [33 x float], align 4
  br label %fill
fill:
  %i = phi i64 [ 0, %entry ], [ %i.next, %fill ]
  %fi = uitofp i64 %i to float
  %xv = fadd float %fi, 1.000000e+00
  %wv = fadd float %fi, 1.000000e+02
  %xp = getelementptr inbounds float, ptr %x, i64 %i
  store float %xv, ptr %xp, align 4
  %wp = getelementptr inbounds float, ptr %w, i64 %i
  store float %wv, ptr %wp, align 4
  %i.next = add i64 %i, 1
  %fill.more = icmp ult i64 %i.next, 8
  br i1 %fill.more, label %fill, label %clear
clear:
  %j = phi i64 [ 0, %fill ], [ %j.next, %clear ]
  %op = getelementptr inbounds float, ptr %out, i64 %j
  store float -1.000000e+00, ptr %op, align 4
  %j.next = add i64 %j, 1
  %clear.more = icmp ult i64 %j.next, 33
  br i1 %clear.more, label %clear, label %run
run:
  %r = call i32 @kernel(ptr %x, ptr %w, ptr %out)
  br label %check
check:
  %k = phi i64 [ 0, %run ], [ %k.next, %next ]
  %bad = phi i32 [ 0, %run ], [ %bad.next, %next ]
  %cell = add i64 %k, 9
  %gp = getelementptr inbounds float, ptr %out, i64 %cell
  %got = load float, ptr %gp, align 4
  %ep = getelementptr inbounds [24 x float], ptr @expected, i64 0, i64 %k
  %want = load float, ptr %ep, align 4
  %same = fcmp oeq float %got, %want
  br i1 %same, label %next, label %report
report:
  %gd = fpext float %got to double
  %wd = fpext float %want to double
  %pr = call i32 (ptr, ...) @printf(ptr @fmt.cell, i64 %cell, double %gd, double %wd)
  br label %next
next:
  %inc = select i1 %same, i32 0, i32 1
  %bad.next = add i32 %bad, %inc
  %k.next = add i64 %k, 1
  %check.more = icmp ult i64 %k.next, 24
  br i1 %check.more, label %check, label %done
done:
  %any = icmp ne i32 %bad, 0
  br i1 %any, label %fail, label %pass
pass:
  %p1 = call i32 (ptr, ...) @printf(ptr @fmt.ok)
  ret i32 0
fail:
  %p2 = call i32 (ptr, ...) @printf(ptr @fmt.bad, i32 %bad.next)
  ret i32 1
}
