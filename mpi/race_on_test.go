//go:build race

package mpi_test

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// that free lists allocate now and then; allocation counts do not hold.
const raceEnabled = true
