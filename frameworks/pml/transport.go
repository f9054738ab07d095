package pml

import "github.com/gompi/gompi/mpierr"

// Transport is point-to-point between the ranks of one communicator, in one
// context: what collective algorithms (frameworks/coll, whose Comm adds to
// it) and light-weight groups (lwgrp) run over. *mpi.Comm is one, in the
// user's context; package mpi gives collective algorithms another over the
// same communicator, in the collectives' own tags.
//
// The calls are MPI's, on bytes: ranks are the communicator's, a Status
// counts bytes, a message longer than the receive buffer fails with
// ErrTruncate, and messages between a pair with one tag arrive in the order
// sent. The methods are safe for concurrent use.
type Transport interface {
	// Rank is this process's rank in the communicator, Size the number of
	// ranks.
	Rank() int
	Size() int
	Send(buf []byte, dst, tag int) error
	Recv(buf []byte, src, tag int) (Status, error)
	// Sendrecv sends and receives at once, so that two ranks that exchange
	// with each other cannot deadlock.
	Sendrecv(sendbuf []byte, dst, sendtag int, recvbuf []byte, src, recvtag int) (Status, error)
	Isend(buf []byte, dst, tag int) (*Request, error)
	Irecv(buf []byte, src, tag int) (*Request, error)
}

// Exactly is the check of a receive whose length every rank knows: got
// bytes arrived from rank from where want were expected. Anything else means
// the ranks passed different counts: an ErrCount error that says so.
func Exactly(got, want, from int) error {
	if got != want {
		return mpierr.Errorf(mpierr.ErrCount, "rank %d sent %d bytes where %d were expected: the ranks passed different counts", from, got, want)
	}
	return nil
}

// PostedSendrecv is Sendrecv made of t's Irecv, Send and Wait, for a
// Transport with no better way: the receive is posted first, so two ranks
// that exchange cannot deadlock; a failed send cancels it.
func PostedSendrecv(t Transport, sendbuf []byte, dst, sendtag int, recvbuf []byte, src, recvtag int) (Status, error) {
	rr, err := t.Irecv(recvbuf, src, recvtag)
	if err != nil {
		return Status{}, err
	}
	if err := t.Send(sendbuf, dst, sendtag); err != nil {
		rr.Cancel()
		rr.Wait()
		return Status{}, err
	}
	return rr.Wait()
}
