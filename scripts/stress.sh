#!/bin/bash
# make stress: runs the host-kernel and guest tests that have flaked (and
# their neighbours) N times each with -count=1, then LOAD rounds (default 1)
# beside CPU hogs that keep every core busy (CI machines are shared). Prints,
# per test, "TestX: N passed, M failed", and the whole output of every failed
# run (the guest tests print the console of a guest that failed). Not part
# of make test.
#
#   N=5 scripts/stress.sh                 # every entry of TESTS below
#   N=3 TESTS='./verify:TestVerifyGuest' scripts/stress.sh
#   LOAD=0 scripts/stress.sh              # no round under load
#   N=0 LOAD=3 TESTS='./harness:^TestNestedKVM$' scripts/stress.sh  # 3 loaded
#
# Exit status: 0 when no run failed, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
N=${N:-5}
LOAD=${LOAD:-1}

# package:regexp of the tests of each tier that flaked or shares their parts.
#   verify: TestVerifyGuest exited 137 without a cell (containment's nproc
#           control in a guest, see docs/reliability.md);
#   pruner/prune: TestHostGeneric's nofile 256 vs 512 (bash's fd 255);
#   evidence/contain: the containment checks that run at once;
#   harness: the ports' tails dropped at the reboot under a slow host
#            (results frame, then the last events);
#   observer: runs side by side, work started on a foretelling and stopped
#             when the run it waits on does not call for it;
#   harness TestNestedKVM: the KVM tier, the pin under KVM in a TCG guest
#             (make test-kvm): its boots sit closest to their deadlines.
TESTS=${TESTS:-./verify:^(TestVerifyGuest|TestHereHostKernel)$ ./pruner/prune:^(TestHostGeneric|TestHostBrokenAborts)$ ./evidence/contain:^(TestExecuteSmallMemLimit|TestExecuteTimeLimits|TestProbeEndsAtTimeout|TestFinishStopsWhenCancelled|TestExecuteCancelledIsAnError)$ ./harness:^(TestResultsDiskFull|TestGuestLargeOutput|TestGuestSlowHostReader|TestNestedKVM)$ ./observer:^(TestObserveGuest|TestContainBesideJointHostKernel|TestContainNotBesideRunsInTheWorkDirHostKernel|TestPhaseBesideBusyHostKernel|TestDiagnosisBesideJointHostKernel|TestBesideDiscardedHostKernel|TestCrossCheckBesideReferenceHostKernel|TestEarlyTimeoutCheckHostKernel|TestEarlyTimeoutCheckOwnCopyHostKernel)$}

if ! [[ $N =~ ^[0-9]+$ && $LOAD =~ ^[0-9]+$ ]] || ((N + LOAD == 0)); then
	echo "stress: N=$N LOAD=$LOAD: want counts of quiet and loaded rounds, 1 or more in all" >&2
	exit 2
fi

out=$(mktemp -d /tmp/lockstep-stress.XXXXXX)
# The KVM tier's outer guest boots Debian's kernel (fetched once); each of
# its runs gets its own results directory below.
if [[ $TESTS == *TestNestedKVM* ]]; then
	{ read -r LOCKSTEP_REF_KERNEL && read -r LOCKSTEP_REF_MODULES; } < <(scripts/ref-kernel.sh)
	# ref-kernel.sh's failure does not reach set -e through the substitution.
	[[ -n $LOCKSTEP_REF_MODULES ]]
	export LOCKSTEP_REF_KERNEL LOCKSTEP_REF_MODULES
fi
hogs=()
stop_hogs() {
	for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${hogs[@]}"; do wait "$p" 2>/dev/null || true; done
	hogs=()
}
trap stop_hogs EXIT

# start_hogs keeps every core busy with a shell loop of its own.
start_hogs() {
	local i
	for ((i = 0; i < $(nproc); i++)); do
		bash -c 'while :; do :; done' &
		hogs+=($!)
	done
}

declare -A pass fail
rounds=$((N + LOAD))
echo "stress: $N round(s)$( ((LOAD)) && echo " + $LOAD beside $(nproc) CPU hogs"), output under $out"
for ((r = 1; r <= rounds; r++)); do
	loaded=0
	if ((r > N)); then
		loaded=1
		start_hogs
	fi
	for entry in $TESTS; do
		pkg=${entry%%:*}
		re=${entry#*:}
		log="$out/round$r-$(echo "$pkg" | tr -c 'A-Za-z0-9\n' '_').log"
		t0=$SECONDS
		status=0
		LOCKSTEP_TEST_KVM_OUT=$out/round$r-kvm CGO_ENABLED=0 "$GO" test -count=1 -timeout 60m -v -run "$re" "$pkg" >"$log" 2>&1 </dev/null || status=$?
		echo "stress: round $r$( ((loaded)) && echo ' (loaded)') $pkg: exit $status in $((SECONDS - t0)) s, load $(cut -d' ' -f1-3 /proc/loadavg) at the end"
		while read -r verdict name; do
			key="$pkg $name"
			if [[ $verdict == PASS ]]; then
				pass[$key]=$((${pass[$key]:-0} + 1))
				fail[$key]=${fail[$key]:-0}
			else
				fail[$key]=$((${fail[$key]:-0} + 1))
				pass[$key]=${pass[$key]:-0}
			fi
		done < <(sed -n 's/^--- \(PASS\|FAIL\): \(Test[A-Za-z0-9_]*\) .*/\1 \2/p' "$log")
		if ((status != 0)); then
			# A failure that printed no --- FAIL line (a panic, a build
			# error, the timeout) still counts, once, against the package.
			if ! grep -q '^--- FAIL' "$log"; then
				key="$pkg (no test verdict)"
				fail[$key]=$((${fail[$key]:-0} + 1))
				pass[$key]=${pass[$key]:-0}
			fi
			echo "----- stress: round $r $pkg failed; its output:"
			cat "$log"
			echo "----- end of $log"
		fi
	done
	((loaded)) && stop_hogs
done

failed=0
echo "stress: results over $rounds round(s)"
while IFS= read -r key; do
	echo "${key#* }: ${pass[$key]} passed, ${fail[$key]} failed   (${key%% *})"
	failed=$((failed + ${fail[$key]}))
done < <(printf '%s\n' "${!pass[@]}" | sort)
((failed == 0))
