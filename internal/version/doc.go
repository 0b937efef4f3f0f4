// Package version says which lockstep this is, from the build information
// the go command writes into every binary (runtime/debug.ReadBuildInfo):
// the main module's version, the VCS revision and whether the tree had
// uncommitted changes, the Go toolchain, and the versions of the modules
// it was built with. `lockstep version`, the guest's run.json and every
// record's provenance carry String, so a bug report names its build.
package version
