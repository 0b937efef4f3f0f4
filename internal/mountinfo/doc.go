// Package mountinfo reads /proc/<pid>/mountinfo (proc(5)): each mount's
// point, file system type and whether it is read-only. The enforcer's
// mounts layer and the pruner's cold runs both read it here.
package mountinfo
