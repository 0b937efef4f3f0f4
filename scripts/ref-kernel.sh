#!/bin/bash
# Prints two lines, the bzImage and the /lib/modules/<release> directory of
# Debian's current distribution kernel (the linux-image package that
# linux-image-amd64 depends on in this machine's apt lists), fetched once
# with apt-get download and unpacked with dpkg-deb -x (nothing installed)
# into the cache. make bench boots it as the reference layout; make
# test-kvm as the outer guest, whose kvm_amd module runs the inner guests.
set -euo pipefail
cache=${XDG_CACHE_HOME:-$HOME/.cache}/lockstep/ref-kernel
if ! ls "$cache"/boot/vmlinuz-* >/dev/null 2>&1; then
	pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
	if [[ -z $pkg ]]; then
		echo "ref-kernel: no linux-image package in the apt lists (run apt-get update)" >&2
		exit 1
	fi
	echo "ref-kernel: fetching $pkg" >&2
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp" "$cache.tmp"' EXIT
	(cd "$tmp" && apt-get download -qq "$pkg")
	rm -rf "$cache.tmp" && mkdir -p "$cache.tmp" && dpkg-deb -x "$tmp"/*.deb "$cache.tmp"
	rm -rf "$cache" && mv "$cache.tmp" "$cache"
fi
kernels=("$cache"/boot/vmlinuz-*) modules=("$cache"/lib/modules/*)
echo "${kernels[0]}"
echo "${modules[0]}"
