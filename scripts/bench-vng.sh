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
# the kernel fetch picks them (kernel.DebianArchiveURIs).
debian_uris() {
	local f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[[ -r $f ]] || continue
		awk '$1 == "deb" && /debian-archive/ && $0 !~ /security/ {
			for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; break } }' "$f"
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[[ -r $f ]] || continue
		awk 'BEGIN { RS = ""; FS = "\n" } {
			deb = 0; sec = 0; key = 0; uris = ""
			for (i = 1; i <= NF; i++) {
				split($i, kv, ":[ \t]*"); k = tolower(kv[1]); v = substr($i, length(kv[1]) + 2)
				if (k == "types" && v ~ /(^|[ \t])deb([ \t]|$)/) deb = 1
				if (k == "suites" && v ~ /security/) sec = 1
				if (k == "signed-by" && v ~ /debian-archive/) key = 1
				if (k == "uris") uris = v
			}
			if (deb && !sec && key) { n = split(uris, u, /[ \t]+/); for (j = 1; j <= n; j++) if (u[j] != "") print u[j] }
		}' "$f"
	done
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
	for p in python3-argcomplete python3-requests; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	((${#missing[@]} == 0)) && return
	echo "bench-vng: installing ${missing[*]}" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

fetch_vng
python_deps
"$prefix/usr/bin/vng" --version 2>/dev/null || PYTHONPATH=$(echo "$prefix"/usr/lib/python3/dist-packages) "$prefix/usr/bin/vng" --version
