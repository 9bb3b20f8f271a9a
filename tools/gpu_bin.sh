# gpu_bin.sh — sourced by the GPU tests' and benchmarks' two halves (tests/gpu/prepare.sh and
# run.sh, tools/bench/gpu/prepare.sh and run.sh): the executables that prepare.sh builds travel
# to the GPU machine as one xz archive.  That machine gets a copy of the working tree of at most
# 64 MiB (/work/.library/device/README.md), and an executable for the GPU holds its kernels'
# PTX and a cubin: a GPT-2 124M step is about 20 MB, under 1 MB packed.
#
# Requires: tar and xz where prepare.sh runs; python3 (its tarfile module) where run.sh runs,
# which may have no xz.

# pack_bin OUTDIR: OUTDIR/bin/ into OUTDIR/bin.tar.xz, and bin/ removed; status 1 (and no
# archive) when that fails.
pack_bin() {
    XZ_OPT=-T2 tar -C "$1" -cJf "$1/bin.tar.xz" bin && rm -rf "$1/bin" && return 0
    rm -f "$1/bin.tar.xz"
    return 1
}

# unpack_bin OUTDIR PYTHON: OUTDIR/bin.tar.xz back into OUTDIR/bin/, unless bin/ is there
# already or there is no archive; status 1 when the archive cannot be read.
unpack_bin() {
    if [ -d "$1/bin" ] || [ ! -f "$1/bin.tar.xz" ]; then return 0; fi
    "$2" -c 'import sys, tarfile
with tarfile.open(sys.argv[1]) as archive:
    archive.extractall(sys.argv[2], **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))' \
        "$1/bin.tar.xz" "$1"
}
