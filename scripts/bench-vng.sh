#!/bin/bash
# virtme-ng against `lockstep boot`, as `make bench` compares them: `vng
# --exec true` and `lockstep boot -- true` alternating in one run, N rounds
# (default 5), medians of wall time and of QEMU's own CPU time (user+sys of
# the QEMU process alone, read by a wrapper that both tools are pointed at).
#
#   (a) each its usual kernel: vng boots Debian's distribution kernel (the
#       reference kernel `make bench` fetched) with its modules; lockstep
#       boots its pin.
#   (b) one kernel file for both: the pin. vng needs `--append root=/dev/root`
#       there (its 9p root is mounted by that tag), and as the pin has no ACPI
#       vng's closing poweroff halts the guest instead of ending QEMU: vng
#       gets `--qemu-opts -no-reboot` and `--append reboot=t`... see the
#       comment at variant_b.
#
# virtme-ng is Debian sid's package (pure Python), fetched once into the
# cache with apt-get download against a temporary sources list naming this
# machine's own Debian archive URIs with suite sid, unpacked with dpkg-deb
# -x into a private prefix; bookworm's python3-argcomplete and
# python3-requests run it (installed when missing).
#
# Usage: scripts/bench-vng.sh <lockstep> <ref-vmlinuz> <ref-modules-dir> [runs]
# Prints one line per arm, then `VNG <key> <value>` lines bench.sh reads.
set -euo pipefail
bin=$1 refk=$2 refmods=$3 runs=${4:-5}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/lockstep
vngver=1.41
prefix=$cache/virtme-ng-$vngver

# debian_uris prints the Debian archive URIs of this machine's apt sources
# (deb entries signed by a Debian archive key, security suites left out), as
# the kernel fetch picks them: lockstep kernel mirror.
debian_uris() {
	"$bin" kernel mirror
}

fetch_vng() {
	[[ -x $prefix/usr/bin/vng ]] && return
	local tmp uris u
	tmp=$(mktemp -d)
	# shellcheck disable=SC2064 # expand tmp now
	trap "rm -rf '$tmp'" RETURN
	mapfile -t uris < <(debian_uris | sed 's#/*$##' | awk '!seen[$0]++')
	if ((${#uris[@]} == 0)); then
		echo "bench-vng: no Debian archive in this machine's apt sources" >&2
		return 1
	fi
	mkdir -p "$tmp"/{lists/partial,cache/archives/partial,parts,prefs,dl}
	for u in "${uris[@]}"; do
		echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $u sid main"
	done >"$tmp/sources.list"
	: >"$tmp/status"
	local opts=(-qq -o "Dir::Etc::SourceList=$tmp/sources.list" -o "Dir::Etc::SourceParts=$tmp/parts"
		-o "Dir::Etc::PreferencesParts=$tmp/prefs" -o "Dir::State::Lists=$tmp/lists"
		-o "Dir::State::status=$tmp/status" -o "Dir::Cache=$tmp/cache"
		-o Acquire::Languages=none -o APT::Sandbox::User=root)
	echo "bench-vng: fetching virtme-ng $vngver (suite sid)" >&2
	apt-get "${opts[@]}" update
	(cd "$tmp/dl" && apt-get "${opts[@]}" download "virtme-ng=$vngver*")
	rm -rf "$prefix.tmp" && mkdir -p "$prefix.tmp"
	dpkg-deb -x "$tmp"/dl/virtme-ng_*.deb "$prefix.tmp"
	mv "$prefix.tmp" "$prefix"
}

python_deps() {
	local missing=()
	# kmod: vng runs depmod on the distribution kernel's modules;
	# busybox-static: vng's initramfs is busybox's when the Rust
	# virtme-ng-init is not packaged (it is not, in 1.41).
	for p in python3-argcomplete python3-requests kmod busybox-static; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	((${#missing[@]} == 0)) && return
	echo "bench-vng: installing ${missing[*]}" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}


# The QEMU wrapper both tools start: it runs the real QEMU as its child and
# appends QEMU's user+sys CPU time in ms and its exit status to
# $BENCH_QEMU_LOG.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/qemu" <<'EOF'
#!/bin/bash
"$BENCH_QEMU_REAL" "$@"
rc=$?
times >"$BENCH_QEMU_LOG.t"
tail -n 1 "$BENCH_QEMU_LOG.t" | awk '{ n = split($0, f, /[ms]+/); t = 0
	for (i = 1; i < n; i += 2) t += f[i] * 60 + f[i + 1]; printf "%d '"$rc"'\n", t * 1000 }' >>"$BENCH_QEMU_LOG"
exit $rc
EOF
chmod +x "$tmp/qemu"
BENCH_QEMU_REAL=$(command -v "${LOCKSTEP_QEMU:-qemu-system-x86_64}")
BENCH_QEMU_LOG=$tmp/cpu.log
export BENCH_QEMU_REAL BENCH_QEMU_LOG

# vng's own kernel arrangement: the distribution kernel with its modules
# tree beside it (vng runs depmod there, so it gets a hard-linked copy of the
# reference kernel, which stays as it was fetched).
refroot=$(cd "$(dirname "$refk")/.." && pwd)
[[ $refmods == "$refroot"/lib/modules/* ]] || { echo "bench-vng: $refmods is not under $refroot" >&2; exit 1; }
vngroot=$cache/virtme-ng-$vngver-ref/$(basename "$refk")
if [[ ! -d $vngroot ]]; then
	mkdir -p "$(dirname "$vngroot")" && rm -rf "$vngroot.tmp"
	cp -al "$refroot" "$vngroot.tmp" && mv "$vngroot.tmp" "$vngroot"
fi
pin=$("$bin" kernel path)
accel=()
# vng picks KVM whenever /dev/kvm exists; lockstep probes that a guest
# really runs. Both get what lockstep's probe found.
"$bin" probe --boot 2>/dev/null | grep -q '^kvm .*KVM usable' || accel=(--disable-kvm)

vng_env=(env "PATH=$prefix/usr/bin:$PATH" "PYTHONPATH=$prefix/usr/lib/python3/dist-packages")
# vng's status and output: on a host without udev (this one has none), vng's
# guest init finds no virtio-serial ports by name and runs the command on the
# console ("console fallback"), which vng sends to /dev/null unless
# --verbose, and vng exits 255 whatever the command did. So a vng run counts
# when QEMU exited 0 (the guest powered off or rebooted) and vng printed no
# Python traceback. Skipping udev in the guest saves vng time: the ratios
# are, if anything, in vng's favour.
arm_vng_ref() {
	timeout 900 "${vng_env[@]}" vng --qemu "$tmp/qemu" "${accel[@]}" --run "$vngroot/boot/$(basename "$refk")" --exec true || true
}
# On the pin vng needs root=/dev/root (the tag of its 9p root), and the pin
# has no ACPI: vng's closing poweroff would halt the guest and leave QEMU
# running. So the command ends the guest itself with a sysrq reboot, which
# with vng's -no-reboot ends QEMU, as lockstep's own guest ends (reboot=t,
# -no-reboot).
arm_vng_pin() {
	timeout 900 "${vng_env[@]}" vng --qemu "$tmp/qemu" "${accel[@]}" --run "$pin" --append root=/dev/root --append reboot=t \
		--exec 'true; echo b >/proc/sysrq-trigger' || true
}
arm_lockstep() { LOCKSTEP_QEMU=$tmp/qemu "$bin" boot -- true; }

# measure ARM: one run; appends its wall ms and QEMU CPU ms to $tmp/ARM.wall
# and .cpu (QEMU's largest: vng may start QEMU for a version check too).
measure() {
	: >"$BENCH_QEMU_LOG"
	local t0 t1
	t0=$(date +%s%N)
	"arm_$1" >"$tmp/$1.out" 2>&1 || { echo "bench-vng: $1 failed:" >&2; tail -n 20 "$tmp/$1.out" >&2; exit 1; }
	t1=$(date +%s%N)
	if ! sort -n "$BENCH_QEMU_LOG" | tail -n 1 | grep -q ' 0$' || grep -q Traceback "$tmp/$1.out"; then
		echo "bench-vng: $1 failed (QEMU: $(paste -sd, "$BENCH_QEMU_LOG")):" >&2
		tail -n 20 "$tmp/$1.out" >&2
		exit 1
	fi
	echo $(((t1 - t0) / 1000000)) >>"$tmp/$1.wall"
	sort -n "$BENCH_QEMU_LOG" | tail -n 1 | cut -d' ' -f1 >>"$tmp/$1.cpu"
}
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# compare NAME A B: one warm-up run of each (depmod, accel verdict,
# initramfs caches), then A and B alternating for $runs rounds.
compare() {
	local name=$1 a=$2 b=$3 i aw ac bw bc
	measure "$a" && measure "$b" && rm -f "$tmp/$a".* "$tmp/$b".*
	for ((i = 0; i < runs; i++)); do measure "$a" && measure "$b"; done
	aw=$(median "$tmp/$a.wall") ac=$(median "$tmp/$a.cpu") bw=$(median "$tmp/$b.wall") bc=$(median "$tmp/$b.cpu")
	echo "$name: $a wall $(paste -sd' ' "$tmp/$a.wall") median $aw ms, qemu cpu $(paste -sd' ' "$tmp/$a.cpu") median $ac ms;" \
		"$b wall $(paste -sd' ' "$tmp/$b.wall") median $bw ms, qemu cpu $(paste -sd' ' "$tmp/$b.cpu") median $bc ms;" \
		"load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "VNG $name-cpu $(ratio "$ac" "$bc")"
	echo "VNG $name-wall $(ratio "$aw" "$bw")"
	rm -f "$tmp/$a".* "$tmp/$b".*
}

fetch_vng
python_deps
echo "bench-vng: $("${vng_env[@]}" vng --version) against lockstep boot, ${accel[*]:-kvm}, $runs rounds alternating" >&2
compare own-kernels vng_ref lockstep
compare pin vng_pin lockstep
