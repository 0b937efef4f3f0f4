// Package nsexec is the shared end of lockstep's roles that give a run
// namespaces of its own before it starts (pruner/cold's cold-run,
// observer/lane's lane-run): namespaces belong to the thread that entered
// them, so the command must be executed from that very thread.
package nsexec
