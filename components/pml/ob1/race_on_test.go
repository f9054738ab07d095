//go:build race

package ob1_test

// raceEnabled: under the race detector code runs several times slower and
// goroutine ranks wait for the cores for milliseconds, so what a measured
// choice measures is the scheduler, not the transports.
const raceEnabled = true
