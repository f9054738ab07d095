package mpi

import (
	"context"
	"errors"
	"fmt"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mpierr"
)

// Special ranks and tags for point-to-point calls (ProcNull and Undefined are
// in group.go).
const (
	// AnySource in a receive or probe matches a message from any rank.
	AnySource = pml.AnySource
	// AnyTag in a receive or probe matches any tag.
	AnyTag = pml.AnyTag
	// MaxTag is the largest tag (MPI_TAG_UB); tags are 0..MaxTag.
	MaxTag = pml.MaxTag
	// BsendOverhead is the space each buffered message takes in the
	// attached buffer beyond its own bytes (MPI_BSEND_OVERHEAD).
	BsendOverhead = pml.BsendOverhead
)

// Request is a non-blocking operation: Wait, Test, WaitContext, Cancel.
// Requests need no freeing, but, as MPI_Wait, the Wait (or Waitall) that
// returns a completed request frees it: gompi may hand the same object out
// again for a later Isend or Irecv, so do not use a request after waiting
// for it. Test does not free, so that a Wait after it still works; a program
// that completes requests with Test alone gives each back with Free once Test
// reports it complete, as MPI_Test frees. A nil *Request is an inactive
// request.
type Request = pml.Request

// Status describes a completed receive or a probed message: source, tag and
// Count in bytes (Count[T] converts it to elements).
type Status = pml.Status

// Message is a message taken by Mprobe or Improbe, for Mrecv or Imrecv.
type Message = pml.Message

// PMLStats are the point-to-point layer's counters (LLP hits and
// fall-backs, messages per protocol).
type PMLStats = pml.Stats

// BufferAttach gives buffered sends (Bsend, Ibsend) the space they copy
// messages into (MPI_Buffer_attach). Size it as the sum of (message size +
// BsendOverhead) of the messages that may be buffered at once. The buffer
// belongs to gompi until BufferDetach.
func (i *Instance) BufferAttach(buf []byte) error {
	if err := i.p2pUp("BufferAttach"); err != nil {
		return err
	}
	return i.pml.BufferAttach(buf)
}

// BufferDetach waits until every buffered message has left, then returns the
// attached buffer (MPI_Buffer_detach); nil when none is attached.
func (i *Instance) BufferDetach() ([]byte, error) {
	if err := i.p2pUp("BufferDetach"); err != nil {
		return nil, err
	}
	return i.pml.BufferDetach()
}

// WaitStats are the counters of an instance's sleeping waits: how often a
// wait slept (Sleeps), and whether a peer, the kernel or another goroutine
// woke it (Rung) or it woke by itself after mpi_wait_sleep_max_ms
// (Timeouts); RingsSent counts the wake-ups this process sent to sleeping
// peers.
type WaitStats = pml.WaitStats

// WaitStats returns the counters of the instance's sleeping waits.
func (i *Instance) WaitStats() WaitStats {
	if i.pml == nil {
		return WaitStats{}
	}
	return i.pml.Engine().Stats()
}

// WaitPolicy returns what the instance's waits do when idle: poll only, or
// poll, yield and sleep (mpi_yield_when_idle), with the budgets and why.
func (i *Instance) WaitPolicy() pml.Policy {
	if i.pml == nil {
		return pml.Policy{}
	}
	return i.pml.Engine().Policy()
}

// PMLStats returns the point-to-point counters: how many blocking sends the
// low-latency path took (LLPHits) and refused (LLPFallbacks), and how many
// messages each protocol carried.
func (i *Instance) PMLStats() PMLStats {
	if i.pml == nil {
		return PMLStats{}
	}
	return i.pml.Stats()
}

// TransportStats are what one BTL sent: Frames (fragments: messages on
// the wire) and Bytes (their headers and payloads, the BTL's own framing
// excluded), counted since Init.
type TransportStats = btl.SendCounts

// TransportStats returns, by BTL name ("tcp"), what each BTL in use that
// counts its traffic has sent since Init (today: tcp; self and shm do not
// count, and are absent). The counts only grow: for an operation, take the
// difference of a reading before and one after. Empty after Finalize.
func (i *Instance) TransportStats() map[string]TransportStats {
	if i.bml == nil || i.down.Load() {
		return map[string]TransportStats{}
	}
	return i.bml.SendCounts()
}

func (i *Instance) p2pUp(op string) error {
	if i.down.Load() || i.pml == nil {
		return mpierr.Errorf(mpierr.ErrComm, "mpi: %s: the instance is finalized", op)
	}
	return nil
}

// checkSend validates a send's destination and tag.
func (c *Comm) checkSend(op string, dst, tag int) error {
	if err := c.check(op); err != nil {
		return err
	}
	if (dst < 0 || dst >= c.pc.Size) && dst != ProcNull {
		return mpierr.Errorf(mpierr.ErrRank, "mpi: %s on %s: destination rank %d: accepted: 0 to %d, or ProcNull",
			op, c.name, dst, c.pc.Size-1)
	}
	if tag < 0 || tag > MaxTag {
		return mpierr.Errorf(mpierr.ErrTag, "mpi: %s on %s: tag %d: accepted: 0 to MaxTag (%d)", op, c.name, tag, MaxTag)
	}
	return nil
}

// checkRecv validates a receive's or probe's source and tag.
func (c *Comm) checkRecv(op string, src, tag int) error {
	if err := c.check(op); err != nil {
		return err
	}
	if (src < 0 || src >= c.pc.Size) && src != ProcNull && src != AnySource {
		return mpierr.Errorf(mpierr.ErrRank, "mpi: %s on %s: source rank %d: accepted: 0 to %d, AnySource or ProcNull",
			op, c.name, src, c.pc.Size-1)
	}
	if (tag < 0 || tag > MaxTag) && tag != AnyTag {
		return mpierr.Errorf(mpierr.ErrTag, "mpi: %s on %s: tag %d: accepted: 0 to MaxTag (%d), or AnyTag", op, c.name, tag, MaxTag)
	}
	if src == AnySource {
		return c.anySourceBlocked(op)
	}
	return nil
}

// procNullStatus is the status of a receive from ProcNull.
var procNullStatus = Status{Source: ProcNull, Tag: AnyTag}

// completed returns a request that is already complete with st.
func (c *Comm) completed(st Status) *Request {
	r := new(Request)
	r.Init(c.inst.pml.Engine(), nil)
	r.Complete(st)
	return r
}

func (c *Comm) send(op string, buf []byte, dst, tag int, mode pml.SendMode) error {
	if err := c.checkSend(op, dst, tag); err != nil {
		return err
	}
	if dst == ProcNull {
		return nil
	}
	return c.inst.pml.Send(&c.pc, buf, dst, tag, mode)
}

func (c *Comm) isend(op string, buf []byte, dst, tag int, mode pml.SendMode) (*Request, error) {
	if err := c.checkSend(op, dst, tag); err != nil {
		return nil, err
	}
	if dst == ProcNull {
		return c.completed(procNullStatus), nil
	}
	return c.inst.pml.Isend(&c.pc, buf, dst, tag, mode)
}

// Send sends buf to rank dst with tag, in standard mode: it returns when buf
// may be reused. Small messages leave at once; large ones wait for the
// receiver to match. Small messages try the low-latency path first when one
// is configured.
func (c *Comm) Send(buf []byte, dst, tag int) error {
	return c.send("Send", buf, dst, tag, pml.Standard)
}

// Ssend is the synchronous send: it returns once the receiver has matched
// the message.
func (c *Comm) Ssend(buf []byte, dst, tag int) error {
	return c.send("Ssend", buf, dst, tag, pml.Synchronous)
}

// Bsend is the buffered send: a message that cannot leave at once is copied
// into the buffer attached with Instance.BufferAttach (ErrBuffer when there
// is no room), and Bsend returns without waiting for the receiver.
func (c *Comm) Bsend(buf []byte, dst, tag int) error {
	return c.send("Bsend", buf, dst, tag, pml.Buffered)
}

// Rsend is the ready send: the caller promises that the receive is already
// posted. gompi sends it as Send does.
func (c *Comm) Rsend(buf []byte, dst, tag int) error {
	return c.send("Rsend", buf, dst, tag, pml.Ready)
}

// Isend starts a standard send; buf belongs to gompi until the request
// completes. Non-blocking sends never use the low-latency path.
func (c *Comm) Isend(buf []byte, dst, tag int) (*Request, error) {
	return c.isend("Isend", buf, dst, tag, pml.Standard)
}

// Issend starts a synchronous send: the request completes once the receiver
// has matched.
func (c *Comm) Issend(buf []byte, dst, tag int) (*Request, error) {
	return c.isend("Issend", buf, dst, tag, pml.Synchronous)
}

// Ibsend copies buf into the attached buffer and returns a completed request
// (MPI_Ibsend).
func (c *Comm) Ibsend(buf []byte, dst, tag int) (*Request, error) {
	return c.isend("Ibsend", buf, dst, tag, pml.Buffered)
}

// Irsend starts a ready send.
func (c *Comm) Irsend(buf []byte, dst, tag int) (*Request, error) {
	return c.isend("Irsend", buf, dst, tag, pml.Ready)
}

// Recv receives into buf a message from src (or AnySource) with tag (or
// AnyTag). Messages from one sender with one tag arrive in the order sent.
// A message longer than buf fills buf and fails with ErrTruncate.
func (c *Comm) Recv(buf []byte, src, tag int) (st Status, err error) {
	if err := c.checkRecv("Recv", src, tag); err != nil {
		return Status{Err: err}, err
	}
	if src == ProcNull {
		return procNullStatus, nil
	}
	env, err := c.inst.pml.Recv(&c.pc, buf, src, tag)
	// Field by field into the result: a Status literal here is built in
	// one temporary and copied to another (see pml.Envelope).
	st.Source, st.Tag, st.Count, st.Err = env.Source, env.Tag, env.Count, err
	return st, err
}

// Irecv starts a receive; buf belongs to gompi until the request completes.
func (c *Comm) Irecv(buf []byte, src, tag int) (*Request, error) {
	if err := c.checkRecv("Irecv", src, tag); err != nil {
		return nil, err
	}
	if src == ProcNull {
		return c.completed(procNullStatus), nil
	}
	return c.inst.pml.Irecv(&c.pc, buf, src, tag)
}

// Sendrecv sends sendbuf to dst and receives into recvbuf from src at the
// same time, so that pairs of ranks can exchange without deadlock.
func (c *Comm) Sendrecv(sendbuf []byte, dst, sendtag int, recvbuf []byte, src, recvtag int) (Status, error) {
	if err := c.checkSend("Sendrecv", dst, sendtag); err != nil {
		return Status{Err: err}, err
	}
	rr, err := c.Irecv(recvbuf, src, recvtag)
	if err != nil {
		return Status{Err: err}, err
	}
	sr, err := c.isend("Sendrecv", sendbuf, dst, sendtag, pml.Standard)
	if err != nil {
		rr.Cancel()
		return Status{Err: err}, err
	}
	_, serr := sr.Wait()
	st, rerr := rr.Wait()
	if serr != nil && rerr == nil {
		return st, serr
	}
	return st, rerr
}

// Probe waits until a message from src with tag can be received and
// describes it, without receiving it. Between Probe and Recv another
// goroutine may take the message: use Mprobe then.
func (c *Comm) Probe(src, tag int) (Status, error) {
	if err := c.checkRecv("Probe", src, tag); err != nil {
		return Status{Err: err}, err
	}
	if src == ProcNull {
		return procNullStatus, nil
	}
	return c.inst.pml.Probe(&c.pc, src, tag)
}

// Iprobe reports whether a message from src with tag can be received now,
// and describes it.
func (c *Comm) Iprobe(src, tag int) (Status, bool, error) {
	if err := c.checkRecv("Iprobe", src, tag); err != nil {
		return Status{Err: err}, false, err
	}
	if src == ProcNull {
		return procNullStatus, true, nil
	}
	return c.inst.pml.Iprobe(&c.pc, src, tag)
}

// Mprobe waits for a message from src with tag and takes it out of matching:
// no other receive can take it, and only Mrecv or Imrecv with the returned
// Message receives it. This is how several goroutines probe and receive
// without racing.
func (c *Comm) Mprobe(src, tag int) (*Message, Status, error) {
	if err := c.checkRecv("Mprobe", src, tag); err != nil {
		return nil, Status{Err: err}, err
	}
	if src == ProcNull {
		return pml.NoProcMessage(), procNullStatus, nil
	}
	return c.inst.pml.Mprobe(&c.pc, src, tag)
}

// Improbe is Mprobe that does not wait: ok is false when no message matches
// now.
func (c *Comm) Improbe(src, tag int) (msg *Message, st Status, ok bool, err error) {
	if err := c.checkRecv("Improbe", src, tag); err != nil {
		return nil, Status{Err: err}, false, err
	}
	if src == ProcNull {
		return pml.NoProcMessage(), procNullStatus, true, nil
	}
	return c.inst.pml.Improbe(&c.pc, src, tag)
}

// checkMessage validates a matched-probe message.
func (c *Comm) checkMessage(op string, m *Message) error {
	if err := c.check(op); err != nil {
		return err
	}
	if m == nil {
		return mpierr.Errorf(mpierr.ErrRequest, "mpi: %s: nil message: pass what Mprobe or Improbe returned", op)
	}
	if !m.IsNoProc() && m.Comm != &c.pc {
		return mpierr.Errorf(mpierr.ErrComm, "mpi: %s on %s: the message was probed on another communicator", op, c.name)
	}
	return nil
}

// Mrecv receives the message m that Mprobe or Improbe took, into buf.
func (c *Comm) Mrecv(buf []byte, m *Message) (Status, error) {
	if err := c.checkMessage("Mrecv", m); err != nil {
		return Status{Err: err}, err
	}
	if m.IsNoProc() {
		return procNullStatus, nil
	}
	return c.inst.pml.Mrecv(buf, m)
}

// Imrecv starts receiving the message m into buf.
func (c *Comm) Imrecv(buf []byte, m *Message) (*Request, error) {
	if err := c.checkMessage("Imrecv", m); err != nil {
		return nil, err
	}
	if m.IsNoProc() {
		return c.completed(procNullStatus), nil
	}
	return c.inst.pml.Imrecv(buf, m)
}

// Waitall waits for every request. statuses, when not nil, receives each
// request's status (it must be at least as long as reqs). The error joins the
// failed requests' errors, each naming its index, with class ErrInStatus;
// nil requests are skipped.
func Waitall(reqs []*Request, statuses []Status) error {
	return WaitallContext(nil, reqs, statuses)
}

// WaitallContext is Waitall that gives up when ctx ends (the error then wraps
// ctx.Err() and has class ErrPending; unfinished requests stay pending).
func WaitallContext(ctx context.Context, reqs []*Request, statuses []Status) error {
	if statuses != nil && len(statuses) < len(reqs) {
		return mpierr.Errorf(mpierr.ErrArg, "mpi: Waitall: %d statuses for %d requests", len(statuses), len(reqs))
	}
	var failed []error
	for i, r := range reqs {
		var st *Status
		if statuses != nil {
			st = &statuses[i]
		}
		err := r.WaitInto(ctx, st)
		if err != nil && mpierr.ClassOf(err) == mpierr.ErrPending {
			return err
		}
		if err != nil {
			failed = append(failed, fmt.Errorf("request %d: %w", i, err))
		}
	}
	return inStatus(failed)
}

// Testall reports whether every request is complete, progressing once when
// some are not. Only when it is true are statuses filled in and the error
// meaningful.
func Testall(reqs []*Request, statuses []Status) (bool, error) {
	if statuses != nil && len(statuses) < len(reqs) {
		return false, mpierr.Errorf(mpierr.ErrArg, "mpi: Testall: %d statuses for %d requests", len(statuses), len(reqs))
	}
	for pass := 0; ; pass++ {
		var pending *Request
		for _, r := range reqs {
			if !r.Done() {
				pending = r
				break
			}
		}
		if pending == nil {
			break
		}
		if pass > 0 {
			return false, nil
		}
		pending.Engine().Progress()
	}
	var failed []error
	for i, r := range reqs {
		// Test, not Status: a persistent request becomes inactive.
		st, _, _ := r.Test()
		if statuses != nil {
			statuses[i] = st
		}
		if st.Err != nil {
			failed = append(failed, fmt.Errorf("request %d: %w", i, st.Err))
		}
	}
	return true, inStatus(failed)
}

func inStatus(failed []error) error {
	switch len(failed) {
	case 0:
		return nil
	case 1:
		return failed[0]
	}
	return mpierr.Wrap(mpierr.ErrInStatus, fmt.Errorf("mpi: %d requests failed: %w", len(failed), errors.Join(failed...)))
}

// Waitany waits until one of the active requests completes and returns
// its index and status, as the Wait that frees it: a persistent request
// becomes inactive and stays in reqs for its next Start; any other entry is
// set to nil (MPI_REQUEST_NULL), so that calling Waitany again finds
// another, and the request may be handed out again. Entries that are nil,
// freed by an earlier Wait, or persistent and inactive are passed over;
// with none left it returns Undefined at once.
func Waitany(reqs []*Request) (int, Status, error) {
	var eng *pml.Engine
	for _, r := range reqs {
		if r.Active() {
			eng = r.Engine()
			break
		}
	}
	if eng == nil {
		return Undefined, Status{Source: AnySource, Tag: AnyTag}, nil
	}
	idx := Undefined
	err := eng.Until(nil, func() bool {
		for i, r := range reqs {
			if r.Active() && r.Done() {
				idx = i
				return true
			}
		}
		return false
	})
	if err != nil {
		return Undefined, Status{Err: err}, err
	}
	st, err := takeDone(reqs, idx)
	return idx, st, err
}

// takeDone returns the status of reqs[idx], which is complete, through the
// Wait that frees it (a reused request, not one left to the collector),
// and clears its entry unless it is persistent.
func takeDone(reqs []*Request, idx int) (Status, error) {
	r := reqs[idx]
	if !r.Persistent() {
		// Before the Wait: once freed, r may be another operation's.
		reqs[idx] = nil
	}
	var st Status
	err := r.WaitInto(nil, &st)
	return st, err
}

// Testany progresses once and returns the index of a completed active
// request, freeing it as Waitany does, or ok false when none is. With no
// active request it returns Undefined and ok true.
func Testany(reqs []*Request) (idx int, st Status, ok bool, err error) {
	for pass := 0; pass < 2; pass++ {
		var eng *pml.Engine
		for i, r := range reqs {
			if !r.Active() {
				continue
			}
			if r.Done() {
				st, err := takeDone(reqs, i)
				return i, st, true, err
			}
			eng = r.Engine()
		}
		if eng == nil {
			return Undefined, Status{Source: AnySource, Tag: AnyTag}, true, nil
		}
		if pass == 0 {
			eng.Progress()
		}
	}
	return Undefined, Status{}, false, nil
}
