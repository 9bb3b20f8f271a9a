#!/bin/sh
# host_cpus.sh — which of the --cpu names given this machine can run the code of.
#
#   sh tests/host_cpus.sh native x86-64-v4 x86-64-v3   prints the runnable ones, one line, in order
#
# The x86-64 micro-architecture levels (and znver4's AVX-512 BF16) are checked against /proc/cpuinfo's flags (the same
# extensions runtime/cpu.c checks when a program starts); `native`, `x86-64` and any other name
# count as runnable.  Tests run natively only what this prints, and for the other levels compile
# the code and check that the program refuses to start with its message (no SIGILL).
flags=$(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
has() { for f in "$@"; do case " $flags " in *" $f "*) ;; *) return 1 ;; esac; done; }
runnable=
for cpu in "$@"; do
    case $cpu in
        x86-64-v4) has avx512f avx512bw avx512cd avx512dq avx512vl avx2 bmi1 bmi2 fma f16c movbe abm ;;
        x86-64-v3) has avx2 bmi1 bmi2 fma f16c movbe abm ;;
        znver4) has avx512f avx512bw avx512cd avx512dq avx512vl avx512_bf16 avx2 bmi1 bmi2 fma f16c movbe abm ;;
        x86-64-v2) has sse4_2 popcnt ssse3 ;;
        *) true ;;
    esac && runnable="$runnable${runnable:+ }$cpu"
done
echo "$runnable"
