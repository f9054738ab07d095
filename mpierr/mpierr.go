// Package mpierr defines the MPI error classes that every gompi error carries.
//
// A class is itself an error value, so callers test for it with errors.Is:
//
//	if errors.Is(err, mpierr.ErrTruncate) { … }
//
// Errors made with Errorf keep their own message, wrap whatever their format
// wraps with %w, and also match their class. ClassOf recovers the class of any
// error (ErrOther for errors that carry none, Success for nil).
//
// The numbering follows Open MPI's mpi.h, so that a class prints with the
// number an MPI programmer would look up.
package mpierr

import (
	"errors"
	"fmt"
)

// Class is an MPI error class. It implements error so that it can sit in an
// error chain and be matched with errors.Is.
type Class int

// The MPI error classes gompi uses, numbered as in Open MPI 5's mpi.h
// (whose process-failure classes are ULFM's).
const (
	Success              Class = 0
	ErrBuffer            Class = 1
	ErrCount             Class = 2
	ErrType              Class = 3
	ErrTag               Class = 4
	ErrComm              Class = 5
	ErrRank              Class = 6
	ErrRequest           Class = 7
	ErrRoot              Class = 8
	ErrGroup             Class = 9
	ErrOp                Class = 10
	ErrTopology          Class = 11
	ErrDims              Class = 12
	ErrArg               Class = 13
	ErrUnknown           Class = 14
	ErrTruncate          Class = 15
	ErrOther             Class = 16
	ErrIntern            Class = 17
	ErrInStatus          Class = 18
	ErrPending           Class = 19
	ErrName              Class = 38
	ErrNoMem             Class = 39
	ErrNotSame           Class = 40
	ErrSize              Class = 49
	ErrSpawn             Class = 50
	ErrUnsupportedOp     Class = 52
	ErrProcAborted       Class = 74
	ErrProcFailed        Class = 75 // a peer the operation needs has died
	ErrProcFailedPending Class = 76 // an AnySource receive while a failure is not acknowledged
	ErrRevoked           Class = 77 // the communicator was revoked
	ErrSession           Class = 78
	ErrValueTooLarge     Class = 79
	ErrUnsupportedParam  Class = 90 // gompi: a configuration value that cannot be honoured
	ErrComponentNotFound Class = 91 // gompi: selection found no usable component
)

var names = map[Class]struct{ name, text string }{
	Success:              {"MPI_SUCCESS", "no error"},
	ErrBuffer:            {"MPI_ERR_BUFFER", "invalid buffer pointer"},
	ErrCount:             {"MPI_ERR_COUNT", "invalid count argument"},
	ErrType:              {"MPI_ERR_TYPE", "invalid datatype"},
	ErrTag:               {"MPI_ERR_TAG", "invalid tag"},
	ErrComm:              {"MPI_ERR_COMM", "invalid communicator"},
	ErrRank:              {"MPI_ERR_RANK", "invalid rank"},
	ErrRequest:           {"MPI_ERR_REQUEST", "invalid request"},
	ErrRoot:              {"MPI_ERR_ROOT", "invalid root"},
	ErrGroup:             {"MPI_ERR_GROUP", "invalid group"},
	ErrOp:                {"MPI_ERR_OP", "invalid reduce operation"},
	ErrTopology:          {"MPI_ERR_TOPOLOGY", "invalid communicator topology"},
	ErrDims:              {"MPI_ERR_DIMS", "invalid topology dimension"},
	ErrArg:               {"MPI_ERR_ARG", "invalid argument"},
	ErrUnknown:           {"MPI_ERR_UNKNOWN", "unknown error"},
	ErrTruncate:          {"MPI_ERR_TRUNCATE", "message truncated"},
	ErrOther:             {"MPI_ERR_OTHER", "other error"},
	ErrIntern:            {"MPI_ERR_INTERN", "internal error"},
	ErrInStatus:          {"MPI_ERR_IN_STATUS", "error code is in status"},
	ErrPending:           {"MPI_ERR_PENDING", "pending request"},
	ErrName:              {"MPI_ERR_NAME", "invalid name"},
	ErrNoMem:             {"MPI_ERR_NO_MEM", "out of memory"},
	ErrNotSame:           {"MPI_ERR_NOT_SAME", "collective arguments not identical"},
	ErrSize:              {"MPI_ERR_SIZE", "invalid size"},
	ErrSpawn:             {"MPI_ERR_SPAWN", "could not spawn processes"},
	ErrUnsupportedOp:     {"MPI_ERR_UNSUPPORTED_OPERATION", "operation not supported"},
	ErrProcAborted:       {"MPI_ERR_PROC_ABORTED", "a process aborted"},
	ErrProcFailed:        {"MPI_ERR_PROC_FAILED", "a process failed"},
	ErrProcFailedPending: {"MPI_ERR_PROC_FAILED_PENDING", "a process failed; the receive may still match"},
	ErrRevoked:           {"MPI_ERR_REVOKED", "the communicator was revoked"},
	ErrValueTooLarge:     {"MPI_ERR_VALUE_TOO_LARGE", "value too large"},
	ErrSession:           {"MPI_ERR_SESSION", "invalid session"},
	ErrUnsupportedParam:  {"GOMPI_ERR_PARAM", "invalid MCA parameter"},
	ErrComponentNotFound: {"GOMPI_ERR_NOT_FOUND", "no usable component"},
}

// Name returns the constant's MPI name, such as "MPI_ERR_TRUNCATE".
func (c Class) Name() string {
	if n, ok := names[c]; ok {
		return n.name
	}
	return fmt.Sprintf("MPI_ERR_CLASS_%d", int(c))
}

// Error returns the name and a short description of the class.
func (c Class) Error() string {
	if n, ok := names[c]; ok {
		return n.name + ": " + n.text
	}
	return c.Name()
}

// Error is an error with its own message that also matches an MPI class.
type Error struct {
	Class Class
	err   error
}

// Errorf formats a message like fmt.Errorf (so %w wraps) and tags it with class c.
func Errorf(c Class, format string, a ...any) error {
	return &Error{Class: c, err: fmt.Errorf(format, a...)}
}

// Wrap tags err with class c, keeping its message. It returns nil for a nil err.
func Wrap(c Class, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Class: c, err: err}
}

func (e *Error) Error() string { return e.err.Error() }

// Unwrap exposes both the wrapped error and the class, so errors.Is matches
// either.
func (e *Error) Unwrap() []error { return []error{e.err, e.Class} }

// ClassOf returns the first MPI class found in err's chain: Success for nil,
// ErrOther for an error that carries no class.
func ClassOf(err error) Class {
	if err == nil {
		return Success
	}
	// The outermost tagged error decides: a layer that re-tags an error
	// knows better than the layer below it.
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	var c Class
	if errors.As(err, &c) {
		return c
	}
	return ErrOther
}
