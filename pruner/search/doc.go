// Package search is the pruner's search over policies: Grow adds what each
// observed run's refusals prove until the exercise behaves as its reference
// does, and Minimise drops every grant that two consecutive runs show is not
// needed. Both work over an injected
// function that runs the exercise under a policy, so the algorithm is tested
// with a fake exercise and used with the real enforcer by package prune.
//
// # Grow
//
// From a start policy (one that grants nothing, or a seed): run observed; the
// same outcome as the reference ends the search (refusals still present stay
// ungranted). Otherwise the run's grants are added and the next round runs.
// A run that failed with no grant to add is run once more unobserved (the
// observer may have caused the failure): if that matches, the policy stands;
// otherwise the exercise aborts, because a failure without a refusal the
// pruner can attribute never becomes a grant. Grants that the policy already
// held ("a refusal survived its own grant") abort too, and so does a search
// that has not converged within the round budget (40).
//
// # Minimise
//
// Over the items (one (path, section) pair or one network rule each), in the
// order given: try removing a block of items (first all of them); one passing
// run is followed by a second, and only two passes make the removal final; a
// failing block is split in halves, each tried in turn. Every decision is
// final, and the result is 1-minimal when outcomes are monotone. The
// reference bound is 2n−1 trials and 4n−2 runs for n items.
//
// lockstep improves on it without giving up a refusal: a block whose removal
// leaves a set of items that a run already failed with (a grow round's
// policy, or an earlier failed trial) is not run again but split at once,
// since removing more than a failing removal cannot pass when outcomes are
// monotone. Items ordered by the grow round that added them make that common:
// the very first trial (removing everything) is the policy the first grow
// round failed with, and removing the last round's grants is the last failing
// grow policy. Minimise reports Trials, Runs and Skipped.
package search
