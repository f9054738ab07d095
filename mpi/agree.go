package mpi

// Agreement that survives deaths (Agree, and Shrink's steps): every
// survivor gets the same value even when members, the one combining
// included, die during it.
//
// The protocol is a rotating coordinator over a perfect failure detector
// (the launcher reports a rank dead only once it is, and every survivor
// hears of it). The coordinator is the lowest rank not known dead. Each
// member sends its contribution to its coordinator; the coordinator waits
// for a contribution from every member not known dead, combines them and
// sends the decision to all. A member takes a decision only from the
// member it holds to be coordinator. When the coordinator dies, members
// send their contribution to the next one, with the decision when they
// took one already: the new coordinator adopts such a decision rather
// than combining anew, so no two survivors leave with different values.
// Members answer a new coordinator after they have left the agreement too:
// the notices are handled in progress (ftState's notices), and decisions
// are kept for a window of agreements.
//
// Messages are PML notices, outside every communicator's matching, so that
// they work on a revoked communicator and need no receive posted.

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/gompi/gompi/frameworks/group"
	"github.com/gompi/gompi/mpierr"
)

// agreeState is a communicator's agreements.
type agreeState struct {
	mu   sync.Mutex
	next uint32 // the number of the next agreement this rank enters
	recs map[uint32]*agreement
}

// agreeWindow is how many past agreements a communicator keeps the
// decisions of, for coordinators that ask late: a member enters
// agreement k+1 only after k ended everywhere it will be asked about.
const agreeWindow = 64

// maxAgreeWords bounds an agreement's values (a notice carries them).
const maxAgreeWords = 256

// agreement is one agreement on a communicator, as this rank sees it.
type agreement struct {
	entered bool
	mine    []int64
	combine func(acc, in []int64)
	// contrib are the contributions received while this rank coordinates
	// (by communicator rank), with decided set on those that carry a
	// decision their sender took.
	contrib map[int]contribution
	decided bool
	value   []int64
	// sentTo is the rank this rank's contribution went to last (-1: none).
	sentTo int
}

type contribution struct {
	vals    []int64
	decided bool
}

func (a *agreeState) rec(k uint32) *agreement {
	if a.recs == nil {
		a.recs = map[uint32]*agreement{}
	}
	r := a.recs[k]
	if r == nil {
		r = &agreement{sentTo: -1, contrib: map[int]contribution{}}
		a.recs[k] = r
		for old := range a.recs {
			if k-old > agreeWindow && k-old < math.MaxUint32/2 {
				delete(a.recs, old)
			}
		}
	}
	return r
}

// coordinator is c's lowest rank not known dead.
func (c *Comm) coordinator() int {
	f := &c.inst.ft
	f.mu.Lock()
	defer f.mu.Unlock()
	for r := 0; r < c.pc.Size; r++ {
		if !f.dead[c.pc.Group.World(r)] {
			return r
		}
	}
	return c.pc.Rank
}

// Agree is a fault-tolerant agreement over c (ULFM's MPIX_Comm_agree):
// every member calls it, and every survivor gets the bitwise AND of the
// flags of the members that took part, the same value on every survivor
// even when members die during it. It works on a failed or revoked
// communicator. Combined with Failed, it tells every survivor the same
// thing: the usual use is to agree whether a phase succeeded everywhere.
func (c *Comm) Agree(flag int) (int, error) {
	if err := c.checkFT("Agree"); err != nil {
		return 0, err
	}
	if err := c.intraOnly("Agree"); err != nil {
		return 0, err
	}
	v, err := c.agree([]int64{int64(flag)}, func(acc, in []int64) { acc[0] &= in[0] })
	if err != nil {
		return 0, fmt.Errorf("mpi: Agree on %s: %w", c.name, err)
	}
	return int(v[0]), nil
}

// agree runs one agreement on vals, combined by combine (which must not
// depend on the order of contributions).
func (c *Comm) agree(vals []int64, combine func(acc, in []int64)) ([]int64, error) {
	if len(vals) > maxAgreeWords {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "an agreement of %d values: at most %d", len(vals), maxAgreeWords)
	}
	a := &c.ft.agree
	a.mu.Lock()
	k := a.next
	a.next++
	r := a.rec(k)
	r.entered, r.mine, r.combine = true, append([]int64(nil), vals...), combine
	c.agreeAdvance(k, r)
	a.mu.Unlock()
	err := c.inst.pml.Engine().Until(nil, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return r.decided || c.agreeTryDecide(k, r)
	})
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int64(nil), r.value...), nil
}

// agreeAdvance sends this rank's contribution to agreement k to its
// coordinator, unless it went there already or this rank coordinates.
// Callers hold a.mu.
func (c *Comm) agreeAdvance(k uint32, r *agreement) {
	if !r.entered {
		return
	}
	to := c.coordinator()
	if to == c.pc.Rank || to == r.sentTo {
		return
	}
	r.sentTo = to
	vals := r.mine
	if r.decided {
		vals = r.value
	}
	c.inst.pml.Notify(c.pc.Group.World(to), agreeMsg(c, noticeContrib, k, r.decided, vals))
}

// agreeTryDecide decides agreement k when this rank coordinates and every
// member not known dead has contributed, or one passed on a decision.
// Callers hold a.mu.
func (c *Comm) agreeTryDecide(k uint32, r *agreement) bool {
	if !r.entered || c.coordinator() != c.pc.Rank {
		return false
	}
	var adopted []int64
	for _, ct := range r.contrib {
		if ct.decided {
			adopted = ct.vals
			break
		}
	}
	if adopted == nil {
		for q := 0; q < c.pc.Size; q++ {
			if q == c.pc.Rank || c.inst.isDead(c.pc.Group.World(q)) {
				continue
			}
			if _, ok := r.contrib[q]; !ok {
				return false
			}
		}
		acc := append([]int64(nil), r.mine...)
		for _, ct := range r.contrib {
			if len(ct.vals) == len(acc) {
				r.combine(acc, ct.vals)
			}
		}
		adopted = acc
	}
	r.decided, r.value = true, adopted
	msg := agreeMsg(c, noticeDecide, k, true, adopted)
	// Highest rank first: when this rank dies half-way, the next
	// coordinator (the lowest) is the likeliest not to have the decision,
	// so the adoption path is the common one, not a rare race.
	for q := c.pc.Size - 1; q >= 0; q-- {
		if w := c.pc.Group.World(q); q != c.pc.Rank && !c.inst.isDead(w) {
			c.inst.pml.Notify(w, msg)
			if h := c.inst.agreeHook; h != nil {
				h(k, q)
			}
		}
	}
	return true
}

// agreeFailed moves c's agreements on after a member's death: this rank
// sends its contributions, and decisions taken, to a new coordinator.
func (c *Comm) agreeFailed() {
	a := &c.ft.agree
	a.mu.Lock()
	for k, r := range a.recs {
		c.agreeAdvance(k, r)
	}
	a.mu.Unlock()
}

// agreeNotice handles a contribution or a decision from world rank src.
func (c *Comm) agreeNotice(src int, kind byte, body []byte) {
	k, decided, vals, ok := parseAgree(body)
	if !ok {
		return
	}
	from := c.pc.Group.Rank(src)
	if from == group.Undefined {
		return
	}
	a := &c.ft.agree
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.rec(k)
	switch kind {
	case noticeContrib:
		r.contrib[from] = contribution{vals, decided}
		if r.decided {
			// A member that asks late: it turned to this rank after its
			// coordinator died.
			c.inst.pml.Notify(src, agreeMsg(c, noticeDecide, k, true, r.value))
		}
	case noticeDecide:
		// Only from the member this rank holds to coordinate: a decision
		// of one it holds dead already is not one the new coordinator
		// will know of.
		if !r.decided && from == c.coordinator() {
			r.decided, r.value = true, vals
		}
	}
	c.inst.pml.Engine().Wake()
}

// agreeMsg is a contribution or decision notice: the header, then k:u32
// decided:u8 n:u16 and n values.
func agreeMsg(c *Comm, kind byte, k uint32, decided bool, vals []int64) []byte {
	b := noticeHeader(kind, c)
	b = binary.LittleEndian.AppendUint32(b, k)
	d := byte(0)
	if decided {
		d = 1
	}
	b = append(b, d)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(vals)))
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

// parseAgree reads an agreement notice's body; a malformed one is ignored.
func parseAgree(b []byte) (k uint32, decided bool, vals []int64, ok bool) {
	if len(b) < 7 {
		return 0, false, nil, false
	}
	k = binary.LittleEndian.Uint32(b)
	decided = b[4] == 1
	n := int(binary.LittleEndian.Uint16(b[5:]))
	if n > maxAgreeWords || len(b) != 7+8*n {
		return 0, false, nil, false
	}
	vals = make([]int64, n)
	for j := range vals {
		vals[j] = int64(binary.LittleEndian.Uint64(b[7+8*j:]))
	}
	return k, decided, vals, true
}

// Shrink makes a communicator of c's survivors (ULFM's MPIX_Comm_shrink),
// in c's rank order. Collective over the survivors; it works on a failed
// or revoked communicator, and agrees on whom to leave out even when
// members die during it: every survivor gets a communicator of the same
// members (a death after the agreement is one the new communicator then
// reports).
func (c *Comm) Shrink() (*Comm, error) {
	const op = "Shrink"
	if err := c.checkFT(op); err != nil {
		return nil, err
	}
	if err := c.intraOnly(op); err != nil {
		return nil, err
	}
	fail := func(err error) (*Comm, error) { return nil, fmt.Errorf("mpi: %s of %s: %w", op, c.name, err) }
	n := c.pc.Size
	words := (n + 63) / 64
	if words+2 > maxAgreeWords {
		return fail(mpierr.Errorf(mpierr.ErrUnsupportedOp, "%d ranks: Shrink agrees on at most %d", n, 64*(maxAgreeWords-2)))
	}
	// One agreement gives the context id (agreeCIDWith's max-reductions)
	// and the union of the dead, each time.
	var dead []int64
	allMax := func(buf []int64) error {
		vals := append(c.deadMask(words), buf...)
		out, err := c.agree(vals, func(acc, in []int64) {
			for j := 0; j < words; j++ {
				acc[j] |= in[j]
			}
			for j := words; j < len(acc); j++ {
				acc[j] = max(acc[j], in[j])
			}
		})
		if err != nil {
			return err
		}
		dead = out[:words]
		copy(buf, out[words:])
		return nil
	}
	cid, err := c.agreeCIDWith(allMax)
	if err != nil {
		return fail(err)
	}
	var gone []int
	for r := 0; r < n; r++ {
		if dead[r/64]&(1<<(r%64)) != 0 {
			gone = append(gone, r)
		}
	}
	g, err := c.inst.groups.ops.Excl(c.pc.Group, gone)
	if err != nil {
		c.inst.cids.set(cid, false)
		return fail(err)
	}
	nc, err := c.inst.newComm(uint16(cid), g, fmt.Sprintf("%s.shrink(%d)", c.name, cid))
	if err != nil {
		c.inst.cids.set(cid, false)
		return fail(err)
	}
	return nc, nil
}

// deadMask is c's members known dead, as a bit mask of ranks.
func (c *Comm) deadMask(words int) []int64 {
	m := make([]int64, words)
	for _, r := range c.deadMembers() {
		m[r/64] |= 1 << (r % 64)
	}
	return m
}
