# Sourced by the benchmark scripts: which libcurl the raw C clients, the Swift clients and curlew are built against.
#
# Default: the system's (curl-config). BENCH_LIBCURL_PREFIX=DIR: a libcurl extracted into DIR (headers in
# DIR/usr/include/<multiarch>, libraries in DIR/usr/lib/<multiarch>), as `make bench-libcurl-backports` does with the
# backports suite's; every binary is linked to it by path and rpath, and the Swift builds go to build folders of
# their own, so the system's builds stay as they are.
#
# Needs BENCH_DIR and ROOT_DIR. Sets LIBCURL_CC_FLAGS (for cc), C_BIN_DIR (where the C clients go),
# SWIFT_ROOT_FLAGS and SWIFT_BENCH_FLAGS (arrays for `swift build` of the root and the Benchmarks package) and
# LIBCURL_VERSION (what the binaries load).
if [ -n "${BENCH_LIBCURL_PREFIX:-}" ]; then
    libcurl_multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
    libcurl_prefix=$(cd "$BENCH_LIBCURL_PREFIX" && pwd)
    libcurl_lib=$libcurl_prefix/usr/lib/$libcurl_multiarch
    libcurl_include=$libcurl_prefix/usr/include/$libcurl_multiarch
    [ -e "$libcurl_lib/libcurl.so" ] || { echo "BENCH_LIBCURL_PREFIX: no $libcurl_lib/libcurl.so" >&2; exit 1; }
    LIBCURL_CC_FLAGS="-I$libcurl_include -L$libcurl_lib -Wl,-rpath,$libcurl_lib -lcurl"
    LIBCURL_VERSION=$(sed -n 's/^#define LIBCURL_VERSION "\(.*\)"/\1/p' "$libcurl_include/curl/curlver.h")
    C_BIN_DIR=$BENCH_DIR/.build/raw-libcurl-$LIBCURL_VERSION
    libcurl_flags=(-Xcc "-I$libcurl_include" -Xlinker "-L$libcurl_lib" -Xlinker "-rpath=$libcurl_lib")
    SWIFT_ROOT_FLAGS=(--scratch-path "$ROOT_DIR/.build/libcurl-$LIBCURL_VERSION" "${libcurl_flags[@]}")
    SWIFT_BENCH_FLAGS=(--scratch-path "$BENCH_DIR/.build/libcurl-$LIBCURL_VERSION" "${libcurl_flags[@]}")
else
    LIBCURL_CC_FLAGS="$(curl-config --cflags) -lcurl"
    C_BIN_DIR=$BENCH_DIR/.build/raw-libcurl
    SWIFT_ROOT_FLAGS=()
    SWIFT_BENCH_FLAGS=()
    LIBCURL_VERSION=$(curl-config --version | cut -d' ' -f2)
fi
