//go:build !race

package ob1_test

const raceEnabled = false
