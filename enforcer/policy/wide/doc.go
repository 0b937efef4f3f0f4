// Package wide finds a policy's grants that are wider than they look: a row
// naming a symbolic link that leads elsewhere, the whole file system, /proc
// or /sys whole, the invoking user's home, a credential store, and a row
// nested beneath a wider one.
//
// Unlike package policy's parsing and rendering, this pass consults the
// running system (lstat, readlink, $HOME): what a row grants depends on the
// machine it runs on. It never changes a policy or its hash; `lockstep
// policy check` prints its warnings and `lockstep -v run` what links resolve
// to.
package wide
