// Package mpihook lets gompi's test harnesses reach what package mpi keeps
// unexported: mpitest's injected deaths, and the instance's low-latency
// paths for their components' tests. Package mpi sets the hooks in its
// init; nothing else writes them.
package mpihook

import "github.com/gompi/gompi/frameworks/llp"

// Crash ends an *mpi.Instance the way a process's death would, as far as
// its peers can tell: its transports close at once, with no goodbye, and
// every later call on it fails. It does not tell the launcher.
var Crash func(inst any)

// LLPs returns the low-latency path modules an *mpi.Instance selected.
var LLPs func(inst any) []llp.Module
