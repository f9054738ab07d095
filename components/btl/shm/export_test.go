package shm

import "github.com/gompi/gompi/frameworks/btl"

// SetTestRead makes f run just before each of m's Peeks first reads a
// ring; m is a module of this package.
func SetTestRead(m btl.Module, f func()) {
	if w, ok := m.(withoutSingleCopy); ok {
		m = w.plainModule
	}
	m.(*module).testRead = f
}
