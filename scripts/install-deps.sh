#!/bin/sh
# Installs the Debian packages ferry builds and runs with, when they are missing.
# As root it uses apt-get (refreshing stale package lists first); otherwise it
# prints the exact command to run and fails. Costs one dpkg query when all is present.
# Usage: scripts/install-deps.sh [extra-package ...]
set -u

want="libpng-dev zlib1g-dev libopenblas-dev pkg-config dataset-fashion-mnist libopenmpi-dev openmpi-bin clang-tidy cppcheck $*"

missing=""
for p in $want; do
    status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null)
    case "$status" in
        ii*) ;;
        *) missing="$missing $p" ;;
    esac
done
[ -z "$missing" ] && exit 0

cmd="apt-get install -y --no-install-recommends$missing"
if [ "$(id -u)" != "0" ]; then
    echo "ferry: missing Debian packages:$missing" >&2
    echo "ferry: run as root:  apt-get update && $cmd" >&2
    exit 1
fi

echo "ferry: installing$missing" >&2
lists=/var/lib/apt/lists
# Refresh the package lists when they are empty or older than a day.
if [ -z "$(find "$lists" -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -n 1)" ]; then
    apt-get update -q >&2 || { echo "ferry: apt-get update failed" >&2; exit 1; }
fi
DEBIAN_FRONTEND=noninteractive $cmd >&2 || {
    echo "ferry: '$cmd' failed" >&2
    exit 1
}
