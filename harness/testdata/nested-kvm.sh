#!/bin/bash
# The inner half of harness.TestNestedKVM, run in the outer guest (TCG,
# -cpu max, Debian's kernel with kvm_amd): the inner lockstep on the pin
# under --accel kvm. Each stage's command, exit status and seconds go to
# stages.tsv beside its outputs under /run/lockstep/results; the test on the
# host judges them. A stage's failure does not stop the next: the test
# reports every one.
#
# Env: LOCKSTEP (the inner lockstep binary), KERNEL (the pin's bzImage),
# OBSERVE_CPUS (the inner observe guest's vCPUs),
# EXERCISES (the exercise tree), PATH_SETS (the fixture's path sets), ROOT
# (the inner observe's guest root: the observer digests its root first).
set -uo pipefail
out=/run/lockstep/results
stages=$out/stages.tsv
: >"$stages"

# stage NAME CMD…: runs CMD with stdout to NAME.out and stderr to NAME.err
# (and on), and notes its status and wall time.
stage() {
	local name=$1 t0 t1 status
	shift
	t0=$(date +%s.%N)
	"$@" 2>&1 >"$out/$name.out" | tee "$out/$name.err" >&2
	status=${PIPESTATUS[0]}
	t1=$(date +%s.%N)
	printf '%s\t%d\t%.2f\n' "$name" "$status" "$(echo "$t1 - $t0" | bc)" >>"$stages"
	echo "nested: $name: exit $status in $(echo "$t1 - $t0" | bc) s" >&2
}

# What the outer guest offers: the CPU flags KVM needs, /dev/kvm, and the
# kernel's log (the modules' load times are its timestamps).
grep -o -w -e svm -e npt /proc/cpuinfo | sort | uniq -c >"$out/cpuflags.txt"
ls -l /dev/kvm >"$out/dev-kvm.txt" 2>&1
dmesg >"$out/dmesg.txt"

stage probe "$LOCKSTEP" probe --boot --json --kernel "$KERNEL"
# The old harness's choice, -cpu host always: documented to fail here.
stage boot-host "$LOCKSTEP" boot --accel kvm --cpu host --kernel "$KERNEL" --results "$out/boot-host" -- true
# shellcheck disable=SC2016 # the inner guest's shell expands it
stage boot "$LOCKSTEP" boot --accel kvm --kernel "$KERNEL" --results "$out/boot" \
	-- sh -c 'echo "$LOCKSTEP_ACCEL" >/run/lockstep/results/accel'
stage selftest "$LOCKSTEP" selftest --accel kvm --json --kernel "$KERNEL" --results "$out/selftest"
mkdir -p /tmp/path-sets
cp -r "$PATH_SETS"/. /tmp/path-sets/
# One vCPU (OBSERVE_CPUS): an SMP guest under KVM under TCG's emulated SVM
# livelocks (harness.nestedInnerCPUs).
stage observe "$LOCKSTEP" observe --accel kvm --cpus "$OBSERVE_CPUS" --key fixture --kernel "$KERNEL" --root "$ROOT" \
	--exercises "$EXERCISES" --path-sets /tmp/path-sets
mkdir -p "$out/observe"
cp -r /tmp/path-sets/. "$out/observe/"
# The outer kernel's log again: its clocksource at the end, any stall.
dmesg >"$out/dmesg-end.txt"
