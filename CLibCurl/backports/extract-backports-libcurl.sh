#!/usr/bin/env bash
# Extracts the libcurl of this Debian release's backports suite (Debian 12: 8.14.1, Debian 13's) into a prefix,
# beside the system's own, which stays untouched: nothing is installed, the system's apt sources and caches are
# not changed. The archive is the one the system's own apt source names for its release; the suite is
# "<codename>-backports". Prints the prefix's libcurl version; exits non-zero if anything is missing.
#
# Usage: extract-backports-libcurl.sh PREFIX
# Afterwards: headers in PREFIX/usr/include/<multiarch>, libraries in PREFIX/usr/lib/<multiarch>, and
# PREFIX/pkgconfig/libcurl.pc naming both: with PKG_CONFIG_PATH=PREFIX/pkgconfig, SwiftPM gives the flags of that
# libcurl to the targets that use CLibCurl (Package.swift's `pkgConfig: "libcurl"`) and to no others.
set -euo pipefail

prefix=${1:?usage: extract-backports-libcurl.sh PREFIX}
prefix=$(mkdir -p "$prefix" && cd "$prefix" && pwd)
multiarch=$(gcc -print-multiarch 2>/dev/null || dpkg-architecture -qDEB_HOST_MULTIARCH)
library="$prefix/usr/lib/$multiarch/libcurl.so.4"
header="$prefix/usr/include/$multiarch/curl/curlver.h"

# The package's libcurl.pc names /usr, where it would be installed. The copy names the prefix, and leaves out the
# private fields of static linking: they require other packages' .pc files, which only their -dev packages install.
write_pkg_config() {
    mkdir -p "$prefix/pkgconfig"
    sed -e "s|^prefix=.*|prefix=$prefix/usr|" \
        -e "s|^libdir=.*|libdir=\${prefix}/lib/$multiarch|" \
        -e "s|^includedir=.*|includedir=\${prefix}/include/$multiarch|" \
        -e '/^Requires.private:/d' -e '/^Libs.private:/d' -e '/^Cflags.private:/d' \
        "$prefix/usr/lib/$multiarch/pkgconfig/libcurl.pc" > "$prefix/pkgconfig/libcurl.pc"
}

if [ -e "$prefix/.extracted" ] && [ -e "$library" ] && [ -e "$header" ]; then
    write_pkg_config
    sed -n 's/^#define LIBCURL_VERSION "\(.*\)"/\1/p' "$header"
    exit 0
fi

# shellcheck disable=SC1091
. /etc/os-release
codename=${VERSION_CODENAME:?/etc/os-release names no VERSION_CODENAME}
suite="$codename-backports"

# The archive the system already uses for its release, in whichever format its sources are written. Read from the
# configured sources themselves (--no-release-info), so it works before the system's own lists were downloaded.
site=$(apt-get indextargets --no-release-info --format '$(SITE) $(RELEASE)' 'Created-By: Packages' 2>/dev/null \
    | awk -v release="$codename" '$2 == release { print $1; exit }')
if [ -z "$site" ]; then
    echo "error: no apt source of this system serves '$codename'; cannot derive the backports suite" >&2
    exit 1
fi

state="$prefix/.apt"
rm -rf "$state"
mkdir -p "$state/sources" "$state/lists/partial" "$state/cache/archives/partial" "$state/debs"
: > "$state/sources.list"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
{
    echo "Types: deb"
    echo "URIs: $site"
    echo "Suites: $suite"
    echo "Components: main"
    [ -e "$keyring" ] && echo "Signed-By: $keyring"
} > "$state/sources/backports.sources"

# apt with only that source and state of its own: the system's lists, caches and sources are not touched.
apt_options=(
    -o "Dir::Etc::SourceList=$state/sources.list"
    -o "Dir::Etc::SourceParts=$state/sources"
    -o "Dir::State::Lists=$state/lists"
    -o "Dir::Cache=$state/cache"
    -o "APT::Get::List-Cleanup=false"
    -o "Debug::NoLocking=true"
    -o "APT::Sandbox::User=root"
)
apt-get "${apt_options[@]}" -qq update
(cd "$state/debs" && apt-get "${apt_options[@]}" -qq download "libcurl4/$suite" "libcurl4-openssl-dev/$suite")

for package in "$state"/debs/*.deb; do
    dpkg-deb -x "$package" "$prefix"
done

if [ ! -e "$library" ] || [ ! -e "$header" ]; then
    echo "error: the backports packages did not provide $library and $header" >&2
    exit 1
fi
# Every library it needs must come from the system (the backport is built for this release).
if ldd "$library" | grep -q 'not found'; then
    echo "error: $library needs libraries this system lacks:" >&2
    ldd "$library" | grep 'not found' >&2
    exit 1
fi
write_pkg_config
touch "$prefix/.extracted"
sed -n 's/^#define LIBCURL_VERSION "\(.*\)"/\1/p' "$header"
