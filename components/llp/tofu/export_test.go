package tofu

import "github.com/gompi/gompi/frameworks/llp"

// SetTestRead makes f run just before m's Progress and Peek first read
// mapped memory; m is a module of this package.
func SetTestRead(m llp.Module, f func()) { m.(*module).testRead = f }
