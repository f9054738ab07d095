// Package lwgrptest helps test code that runs over a pml.Transport:
// Lamport wraps one and counts the rounds of what runs over it.
package lwgrptest

import (
	"encoding/binary"
	"sync"

	"github.com/gompi/gompi/frameworks/pml"
)

// Lamport is a Transport that counts rounds: every message carries its
// sender's clock in 8 extra bytes, and a receiver's clock becomes at least
// the message's plus one; after a collective the largest clock of its
// members is its number of rounds. Its blocking calls are counted; Isend
// and Irecv pass through uncounted (lwgrp's algorithms do not use them).
type Lamport struct {
	pml.Transport
	mu    sync.Mutex
	clock int64
}

// Clock is this member's clock: the rounds it has seen.
func (l *Lamport) Clock() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.clock
}

func (l *Lamport) stamp(buf []byte) []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append(binary.LittleEndian.AppendUint64(nil, uint64(l.clock)), buf...)
}

// unstamp moves the clock past the message's and copies its payload out.
func (l *Lamport) unstamp(in, buf []byte, st pml.Status) pml.Status {
	l.mu.Lock()
	l.clock = max(l.clock, int64(binary.LittleEndian.Uint64(in))+1)
	l.mu.Unlock()
	copy(buf, in[8:st.Count])
	st.Count -= 8
	return st
}

func (l *Lamport) Send(buf []byte, dst, tag int) error {
	return l.Transport.Send(l.stamp(buf), dst, tag)
}

func (l *Lamport) Recv(buf []byte, src, tag int) (pml.Status, error) {
	in := make([]byte, 8+len(buf))
	st, err := l.Transport.Recv(in, src, tag)
	if err != nil {
		return st, err
	}
	return l.unstamp(in, buf, st), nil
}

func (l *Lamport) Sendrecv(sendbuf []byte, dst, sendtag int, recvbuf []byte, src, recvtag int) (pml.Status, error) {
	in := make([]byte, 8+len(recvbuf))
	st, err := l.Transport.Sendrecv(l.stamp(sendbuf), dst, sendtag, in, src, recvtag)
	if err != nil {
		return st, err
	}
	return l.unstamp(in, recvbuf, st), nil
}
