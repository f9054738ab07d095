// Package mpihook lets gompi's test harnesses reach what package mpi keeps
// unexported: mpitest's injected deaths. Package mpi sets the hooks in its
// init; nothing else writes them.
package mpihook

// Crash ends an *mpi.Instance the way a process's death would, as far as
// its peers can tell: its transports close at once, with no goodbye, and
// every later call on it fails. It does not tell the launcher.
var Crash func(inst any)
