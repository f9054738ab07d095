package mpi

import (
	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/mpierr"
)

// Elem is the set of element types typed calls accept: fixed-size numbers,
// bool, and named types over them (see package datatype).
//
// Go methods cannot have type parameters, so typed point-to-point calls are
// package-level functions over slices: Send(c, buf, dst, tag) sends a []T
// without copying it (its backing array is sent as bytes). Counts in Status
// are in bytes; Count converts them to elements.
type Elem = datatype.Elem

// Count returns the number of elements of T a status describes. A message
// whose length is not a whole number of elements (the sender used another
// type) is an ErrCount error: MPI_Get_count's MPI_UNDEFINED.
func Count[T Elem](st Status) (int, error) {
	n, ok := datatype.Count[T](st.Count)
	if !ok {
		return n, mpierr.Errorf(mpierr.ErrCount, "mpi: a message of %d bytes is not a whole number of %d-byte elements", st.Count, datatype.Size[T]())
	}
	return n, nil
}

// checkCount turns a receive of a partial element into an ErrCount error.
func checkCount[T Elem](st Status, err error) (Status, error) {
	if err != nil {
		return st, err
	}
	if _, cerr := Count[T](st); cerr != nil {
		st.Err = cerr
		return st, cerr
	}
	return st, nil
}

// Send sends the elements of buf (Comm.Send).
func Send[T Elem](c *Comm, buf []T, dst, tag int) error { return c.Send(datatype.Bytes(buf), dst, tag) }

// Ssend is the synchronous Send (Comm.Ssend).
func Ssend[T Elem](c *Comm, buf []T, dst, tag int) error {
	return c.Ssend(datatype.Bytes(buf), dst, tag)
}

// Bsend is the buffered Send (Comm.Bsend).
func Bsend[T Elem](c *Comm, buf []T, dst, tag int) error {
	return c.Bsend(datatype.Bytes(buf), dst, tag)
}

// Rsend is the ready Send (Comm.Rsend).
func Rsend[T Elem](c *Comm, buf []T, dst, tag int) error {
	return c.Rsend(datatype.Bytes(buf), dst, tag)
}

// Isend starts sending the elements of buf (Comm.Isend).
func Isend[T Elem](c *Comm, buf []T, dst, tag int) (*Request, error) {
	return c.Isend(datatype.Bytes(buf), dst, tag)
}

// Issend starts a synchronous send (Comm.Issend).
func Issend[T Elem](c *Comm, buf []T, dst, tag int) (*Request, error) {
	return c.Issend(datatype.Bytes(buf), dst, tag)
}

// Ibsend buffers and starts a send (Comm.Ibsend).
func Ibsend[T Elem](c *Comm, buf []T, dst, tag int) (*Request, error) {
	return c.Ibsend(datatype.Bytes(buf), dst, tag)
}

// Irsend starts a ready send (Comm.Irsend).
func Irsend[T Elem](c *Comm, buf []T, dst, tag int) (*Request, error) {
	return c.Irsend(datatype.Bytes(buf), dst, tag)
}

// Recv receives elements into buf (Comm.Recv). Count[T] of the status gives
// the number received; a message that is not a whole number of elements is
// an ErrCount error (its bytes are in buf).
func Recv[T Elem](c *Comm, buf []T, src, tag int) (Status, error) {
	return checkCount[T](c.Recv(datatype.Bytes(buf), src, tag))
}

// Irecv starts receiving elements into buf (Comm.Irecv). Check the element
// count of the completed status with Count[T].
func Irecv[T Elem](c *Comm, buf []T, src, tag int) (*Request, error) {
	return c.Irecv(datatype.Bytes(buf), src, tag)
}

// Sendrecv sends the elements of sendbuf to dst and receives into recvbuf
// from src at the same time (Comm.Sendrecv).
func Sendrecv[S, R Elem](c *Comm, sendbuf []S, dst, sendtag int, recvbuf []R, src, recvtag int) (Status, error) {
	return checkCount[R](c.Sendrecv(datatype.Bytes(sendbuf), dst, sendtag, datatype.Bytes(recvbuf), src, recvtag))
}

// Mrecv receives a matched-probe message into buf (Comm.Mrecv).
func Mrecv[T Elem](c *Comm, buf []T, m *Message) (Status, error) {
	return checkCount[T](c.Mrecv(datatype.Bytes(buf), m))
}

// Imrecv starts receiving a matched-probe message into buf (Comm.Imrecv).
func Imrecv[T Elem](c *Comm, buf []T, m *Message) (*Request, error) {
	return c.Imrecv(datatype.Bytes(buf), m)
}
