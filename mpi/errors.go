package mpi

import "github.com/gompi/gompi/mpierr"

// MPI error classes. Every error gompi returns carries one; test for it with
// errors.Is(err, mpi.ErrTruncate), or get it with ErrorClass.
const (
	ErrBuffer        = mpierr.ErrBuffer
	ErrCount         = mpierr.ErrCount
	ErrType          = mpierr.ErrType
	ErrTag           = mpierr.ErrTag
	ErrComm          = mpierr.ErrComm
	ErrRank          = mpierr.ErrRank
	ErrRequest       = mpierr.ErrRequest
	ErrRoot          = mpierr.ErrRoot
	ErrGroup         = mpierr.ErrGroup
	ErrOp            = mpierr.ErrOp
	ErrArg           = mpierr.ErrArg
	ErrUnknown       = mpierr.ErrUnknown
	ErrTruncate      = mpierr.ErrTruncate
	ErrOther         = mpierr.ErrOther
	ErrIntern        = mpierr.ErrIntern
	ErrInStatus      = mpierr.ErrInStatus
	ErrPending       = mpierr.ErrPending
	ErrNoMem         = mpierr.ErrNoMem
	ErrUnsupportedOp = mpierr.ErrUnsupportedOp
	ErrProcAborted   = mpierr.ErrProcAborted
	ErrProcFailed    = mpierr.ErrProcFailed
	// ErrProcFailedPending: an AnySource receive on a communicator with a
	// failed member not yet acknowledged (Comm.AckFailed).
	ErrProcFailedPending = mpierr.ErrProcFailedPending
	// ErrRevoked: the communicator was revoked (Comm.Revoke).
	ErrRevoked = mpierr.ErrRevoked
)

// ErrorClass returns the MPI class of err: mpierr.Success for nil,
// ErrOther for an error that carries none.
func ErrorClass(err error) mpierr.Class { return mpierr.ClassOf(err) }
