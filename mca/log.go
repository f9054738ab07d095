package mca

import (
	"github.com/hashicorp/go-hclog"
)

// Logger is a framework's (or a component's) logger: an hclog logger plus the
// framework's numeric verbosity, 0–100, from <fw>_base_verbose. Messages carry
// a verbosity of their own and appear when it is at most the framework's.
//
// Guard anything on a hot path with V, so that a disabled message costs one
// comparison and no allocation:
//
//	if log.V(mca.VerboseTrace) { log.Log(mca.VerboseTrace, "fragment", "len", n) }
type Logger struct {
	h       hclog.Logger
	verbose int
}

// hclogLevel maps a message verbosity onto hclog's levels. Open MPI's names
// run the other way round from hclog's (its "trace", 60, is less chatty than
// its "debug", 80), so the mapping goes by number.
func hclogLevel(n int) hclog.Level {
	switch {
	case n <= VerboseError:
		return hclog.Error
	case n <= VerboseInfo:
		return hclog.Info
	case n <= VerboseDebug:
		return hclog.Debug
	}
	return hclog.Trace
}

func newLogger(h hclog.Logger, verbose int) *Logger {
	// hclog filters by its own level too; set it so that it never hides a
	// message our numeric check lets through, and hides everything else.
	if verbose <= VerboseError {
		h.SetLevel(hclog.Warn)
	} else {
		h.SetLevel(hclogLevel(verbose))
	}
	return &Logger{h: h, verbose: verbose}
}

// V reports whether messages of verbosity n appear.
func (l *Logger) V(n int) bool { return n <= l.verbose }

// Verbosity returns the threshold, 0–100.
func (l *Logger) Verbosity() int { return l.verbose }

// Log emits msg with key/value pairs when n is at most the threshold.
func (l *Logger) Log(n int, msg string, kv ...any) {
	if n <= l.verbose {
		l.h.Log(hclogLevel(n), msg, kv...)
	}
}

// Error emits msg at every verbosity.
func (l *Logger) Error(msg string, kv ...any) { l.h.Error(msg, kv...) }

// Warn emits msg at every verbosity: warnings are for the user, not for
// debugging.
func (l *Logger) Warn(msg string, kv ...any) { l.h.Warn(msg, kv...) }

// Named returns a logger for a component of the framework, with the same
// threshold.
func (l *Logger) Named(name string) *Logger {
	return newLogger(l.h.Named(name), l.verbose)
}

// HCLog returns the underlying hclog logger, for libraries that take one
// (go-plugin).
func (l *Logger) HCLog() hclog.Logger { return l.h }
