#!/usr/bin/env bash
# bench-kernel.sh: build the pinned kernel source twice on this machine, with
# lockstep's configuration (tinyconfig + kernel/fragment.config) and with
# Phobos's (x86_64_defconfig + kvm_guest.config + its option list, as its
# build-kvm-kernel.sh has them), and print both wall and CPU
# times, their ratios and both bzImage sizes. `make bench-kernel` runs it; it is not part of
# CI (Phobos's configuration alone took 24m55s on 2 cores here).
#
# Usage: scripts/bench-kernel.sh [pin]        (default 7.2.13)
# Env:   LOCKSTEP (the lockstep binary, default bin/lockstep),
#        JOBS (make -j, default nproc), KEEP=1 keeps the object trees.
set -euo pipefail

pin=${1:-7.2.13}
repo=$(cd "$(dirname "$0")/.." && pwd)
lockstep=${LOCKSTEP:-$repo/bin/lockstep}
jobs=${JOBS:-$(nproc)}
[ -x "$lockstep" ] || { echo "bench-kernel: $lockstep missing; run make build" >&2; exit 2; }

# 1. Make sure the pin's source is fetched, checked and unpacked (this also
#    builds lockstep's kernel into the cache if it is not there yet; that
#    build is not the one timed below).
"$lockstep" kernel build --pin "$pin" >&2
cache=${XDG_CACHE_HOME:-$HOME/.cache}/lockstep/kernels
sha=$(awk -v p="$pin" '$1 == p { for (i = 2; i <= NF; i++) if ($i ~ /^sha256=/) { sub(/^sha256=/, "", $i); print $i } }' "$repo/kernel/pins.txt")
src=$(find "$cache/sources/$sha" -mindepth 1 -maxdepth 1 -type d | head -n1)
[ -f "$src/Makefile" ] || { echo "bench-kernel: no unpacked source for $pin under $cache/sources/$sha" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-kernel.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
export KBUILD_BUILD_USER=lockstep KBUILD_BUILD_HOST=lockstep

# run CMD…: run and log one command; its CPU time (user + system of it and
# everything it waited for, from GNU time) is added to the file $cpufile.
cpufile=/dev/null
run() {
	echo "+ $*" >&2
	/usr/bin/time -a -o "$cpufile" -f '%U %S' "$@"
}

# timed <name> <configure function>: configure into $work/<name>, then time
# configure + `make bzImage`; prints "<wall s> <cpu s>" on stdout (cpu: user +
# system of every command, which a busy machine inflates far less than wall
# time).
timed() {
	local name=$1 conf=$2 obj=$work/$1 start end
	mkdir -p "$obj"
	cpufile=$work/$name.cpu
	: >"$cpufile"
	start=$(date +%s)
	"$conf" "$obj" >"$work/$name.log" 2>&1
	run make -C "$src" O="$obj" ARCH=x86_64 -j"$jobs" bzImage >>"$work/$name.log" 2>&1 ||
		{ tail -n 30 "$work/$name.log" >&2; echo "bench-kernel: $name build failed" >&2; exit 1; }
	end=$(date +%s)
	echo "$((end - start)) $(awk '{ s += $1 + $2 } END { printf "%d", s }' "$cpufile")"
}

# The fragment as lockstep applies it to this pin (overlays included).
ours() {
	run make -C "$src" O="$1" ARCH=x86_64 tinyconfig
	printf '\n' >>"$1/.config"
	run "$lockstep" kernel fragment --pin "$pin" >>"$1/.config"
	run make -C "$src" O="$1" ARCH=x86_64 olddefconfig
}

phobos() {
	local cfg="run $src/scripts/config --file $1/.config"
	run make -C "$src" O="$1" ARCH=x86_64 x86_64_defconfig kvm_guest.config
	for o in SECURITY SECURITY_LANDLOCK AUDIT AUDITSYSCALL EXT4_FS VIRTIO_BLK DEVTMPFS DEVTMPFS_MOUNT \
		PROC_FS SYSFS TMPFS SECCOMP SECCOMP_FILTER PTRACE INET IPV6 UNIX BINFMT_ELF BINFMT_SCRIPT \
		SERIAL_8250 SERIAL_8250_CONSOLE MAGIC_SYSRQ POSIX_TIMERS FHANDLE \
		SECURITY_NETWORK VIRTIO_PCI ACPI BLK_DEV; do
		$cfg --enable "$o"
	done
	$cfg --enable DEBUG_INFO_NONE --disable DEBUG_INFO_BTF
	$cfg --set-str LSM "landlock,lockdown,yama,integrity"
	run make -C "$src" O="$1" ARCH=x86_64 olddefconfig
}

echo "bench-kernel: $pin from $src, make -j$jobs; logs in $work; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
read -r t_ours c_ours < <(timed ours ours)
echo "bench-kernel: lockstep configuration: ${t_ours}s wall, ${c_ours}s CPU" >&2
read -r t_phobos c_phobos < <(timed phobos phobos)
echo "bench-kernel: Phobos configuration: ${t_phobos}s wall, ${c_phobos}s CPU" >&2

size() { stat -c %s "$work/$1/arch/x86/boot/bzImage"; }
fmt() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
printf 'pin %s, %s CPUs, make -j%s (configure + bzImage), load at the end %s\n' "$pin" "$(nproc)" "$jobs" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '  lockstep (tinyconfig + fragment):             wall %8s  CPU %8s  bzImage %9d bytes\n' "$(fmt "$t_ours")" "$(fmt "$c_ours")" "$(size ours)"
printf '  Phobos (x86_64_defconfig + kvm_guest.config): wall %8s  CPU %8s  bzImage %9d bytes\n' "$(fmt "$t_phobos")" "$(fmt "$c_phobos")" "$(size phobos)"
awk -v a="$t_phobos" -v b="$t_ours" -v c="$c_phobos" -v d="$c_ours" 'BEGIN { printf "  ratio Phobos/lockstep: %.2fx by wall time, %.2fx by CPU time (goal: at least 4x)\n", a / b, c / d }'
