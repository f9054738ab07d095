package mpierr

import (
	"errors"
	"fmt"
	"testing"
)

func TestClasses(t *testing.T) {
	base := errors.New("disk on fire")
	err := Errorf(ErrTruncate, "receive of %d bytes into %d: %w", 10, 5, base)
	if !errors.Is(err, ErrTruncate) || !errors.Is(err, base) || errors.Is(err, ErrRank) {
		t.Errorf("errors.Is does not see both the class and the cause")
	}
	if err.Error() != "receive of 10 bytes into 5: disk on fire" {
		t.Errorf("message %q", err)
	}
	wrapped := fmt.Errorf("recv: %w", err)
	if ClassOf(wrapped) != ErrTruncate {
		t.Errorf("ClassOf(wrapped) = %v", ClassOf(wrapped))
	}
	// The outermost class wins over an inner one.
	retagged := Wrap(ErrArg, fmt.Errorf("bad: %w", Errorf(ErrRank, "rank 9")))
	if ClassOf(retagged) != ErrArg || !errors.Is(retagged, ErrRank) {
		t.Errorf("ClassOf(retagged) = %v", ClassOf(retagged))
	}
	if ClassOf(nil) != Success || ClassOf(base) != ErrOther || ClassOf(fmt.Errorf("x: %w", ErrTag)) != ErrTag {
		t.Errorf("ClassOf of nil, plain and bare-class errors")
	}
	if Wrap(ErrArg, nil) != nil {
		t.Error("Wrap(nil) is not nil")
	}
	if ErrTruncate.Name() != "MPI_ERR_TRUNCATE" || Class(999).Name() != "MPI_ERR_CLASS_999" {
		t.Errorf("names %s %s", ErrTruncate.Name(), Class(999).Name())
	}
}
