// Package lane runs an exercise's independent runs side by side in the
// guest. None of the reference runs, nor of a round's joint runs, needs
// another's result, so they need not run one after another; but every run
// starts from a fresh copy of the exercise in the same working directory
// and may bind the same loopback port, so two at once would trip over each
// other. A lane gives one run both of those to itself.
//
// A run starts as the role Verb (`<program> lane-run --from F --at W
// [--cpus L] -- <command>…`, lockstep's hidden verb of that name). The role moves into a
// mount namespace and a network namespace of its own, binds its copy F
// over the working directory W (so the command, its policy's grants and
// its reports see the path every run sees), brings the new namespace's
// loopback up (127.0.0.1 and ::1, as the guest's own), changes into W and
// executes the command, on the CPUs L only when given. The runner reads the run's reports from F. When
// the run's last process ends, both namespaces are gone.
//
// The observer uses lanes in the guest only (it is root there and owns the
// kernel); W must not be deleted while a lane runs, since removing a mount
// point in one namespace detaches the mounts on it in every other.
package lane
