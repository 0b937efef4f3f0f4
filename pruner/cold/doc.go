// Package cold runs each of the pruner's runs from the root file system's
// own state, so that what one run leaves outside its working directory (a
// compiler cache, ~/.m2, __pycache__ in a system path, a file in /tmp or
// /root) cannot let a later run pass without a grant it needs: a prune with a
// cold cache, which guests and fresh containers give by construction.
//
// A run starts as the role Verb (`<program> cold-run --stage S --keep K… --
// <command>…`, served by prune.ServeRoles and by lockstep's hidden verb of
// that name). The role moves into a mount namespace of its own, mounts a
// tmpfs at S and builds a new root in it: every mount of the old tree that
// is a writable directory becomes an overlay whose upper layer lies in that
// tmpfs; read-only mounts, pseudo file systems and /proc, /sys and /dev are
// bound as they are; a writable file mounted on its own (a container's
// /etc/hosts) is a copy in the tmpfs; each keep path (the working
// directory, where the pruner reads the run's reports, and the pruner's
// scratch directory, where strace writes its trace) is bound through, so
// writes there stay. It then moves the new root over / and changes root
// into it, drops CAP_SYS_ADMIN from its bounding set (a run has no more
// privilege than in an ordinary container) and executes the command. When
// the run's last process ends, the namespace, the overlays and everything
// written into them are gone.
//
// Plan decides, from /proc/self/mountinfo (mountinfo.Parse), what becomes of
// each mount; Enter carries it out; Main is the role.
package cold
