package btl

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Callbacks is the receive-callback table every module keeps: one callback
// per tag and one for lost peers. Lookups on the receive path take no lock.
type Callbacks struct {
	mu   sync.Mutex
	recv [256]atomic.Pointer[RecvFunc]
	run  [256]atomic.Pointer[RunRecvFunc]
	lost atomic.Pointer[ErrorFunc]
}

// RegisterRecv installs fn for tag; a tag has one callback.
func (c *Callbacks) RegisterRecv(tag Tag, fn RecvFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.recv[tag].Load() != nil {
		panic(fmt.Sprintf("btl: a callback for tag 0x%02x is already registered", uint8(tag)))
	}
	c.recv[tag].Store(&fn)
}

// RegisterRecvRun installs fn for runs of fragments with tag (see
// RunReceiver); a tag has one.
func (c *Callbacks) RegisterRecvRun(tag Tag, fn RunRecvFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.run[tag].Load() != nil {
		panic(fmt.Sprintf("btl: a run callback for tag 0x%02x is already registered", uint8(tag)))
	}
	c.run[tag].Store(&fn)
}

// DeliverRun hands a run of fragments with one tag, from one peer and in
// order, to the tag's run callback, or one at a time to its callback when
// it has none. It reports false when neither is registered (the fragments
// are dropped).
func (c *Callbacks) DeliverRun(src int, tag Tag, frags [][]byte) bool {
	if fn := c.run[tag].Load(); fn != nil {
		(*fn)(src, tag, frags)
		return true
	}
	fn := c.recv[tag].Load()
	if fn == nil {
		return false
	}
	for _, frag := range frags {
		(*fn)(src, tag, frag)
	}
	return true
}

// RegisterError installs the lost-peer callback.
func (c *Callbacks) RegisterError(fn ErrorFunc) { c.lost.Store(&fn) }

// Deliver hands a fragment to its tag's callback. It reports false when no
// callback is registered for the tag (the fragment is dropped: a protocol
// error of the sender).
func (c *Callbacks) Deliver(src int, tag Tag, frag []byte) bool {
	fn := c.recv[tag].Load()
	if fn == nil {
		return false
	}
	(*fn)(src, tag, frag)
	return true
}

// Lost tells the lost-peer callback, if any.
func (c *Callbacks) Lost(rank int, err error) {
	if fn := c.lost.Load(); fn != nil {
		(*fn)(rank, err)
	}
}
