// Package suite is a suite for cisuite's test: one test passes, one fails,
// one skips for want of a kernel feature and one for want of a program.
package suite

import (
	"os"
	"testing"
)

func TestPasses(t *testing.T) {}

func TestFails(t *testing.T) {
	if os.Getenv("CISUITE_ALL_PASS") == "" {
		t.Fatal("failed on purpose")
	}
}

func TestNeedsKernel(t *testing.T) {
	t.Skip("kernel: network namespaces: refused")
}

func TestNeedsProgram(t *testing.T) {
	t.Run("sub", func(t *testing.T) {
		t.Log("looking for it")
		t.Skip("needs mpiexec.mpich")
	})
}
