package mpi

// Failure that reaches every communicator (ULFM's semantics, mpirun
// --enable-recovery): once the instance learns that a process died, every
// communicator whose groups hold it fails its collectives, pending and
// later, with ErrProcFailed on every survivor, whatever component runs
// them; Revoke fails everything on a communicator, everywhere; Agree and
// Shrink (agree.go) work on across further deaths.
//
// Why the PML interrupts, not the components: a collective waits on live
// peers as much as on the dead one (a tree's parent that will never send
// because its own child died), and every component waits through the
// PML's requests or through collComm.Until. Interrupting the
// communicator's collective traffic there reaches them all, including
// plugins' schedules and coroutines, with no component knowing about
// failures.

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gompi/gompi/frameworks/group"
	"github.com/gompi/gompi/frameworks/llp"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/internal/mpihook"
	"github.com/gompi/gompi/mpierr"
)

// The bits of commFT.state.
const (
	ftFailed  = 1 << iota // a member died: collectives fail
	ftRevoked             // Revoke: everything fails
)

// ftState is what an instance knows of failed processes, and the
// communicators that knowledge reaches.
type ftState struct {
	// delivering is held while a death reaches the communicators, so that
	// AckFailed acknowledges only deaths whose AnySource receives have
	// already failed: a receive posted after it must not fail for them.
	delivering sync.Mutex
	mu         sync.Mutex
	dead       []bool       // by world rank
	order      []int        // the world ranks, in the order learned
	known      atomic.Int32 // len(order), read without mu
	// comms are the live communicators (parts and intercommunicators'
	// local copies too), by context id, for failures and notices.
	comms map[uint16]*Comm
	// orphans are notices for a context id not created here yet: a peer
	// may make a communicator and agree on it before this rank has made
	// it.
	orphans map[uint16][]orphan
}

type orphan struct {
	src int
	msg []byte
}

// maxOrphans bounds the notices kept for communicators not made yet.
const maxOrphans = 4096

// commFT is a communicator's share of the failure state.
type commFT struct {
	state atomic.Uint32
	// hash names the communicator's groups in notices, beside its context
	// id, so that a notice for a freed one never reaches a new one with
	// the same id and other members.
	hash uint32
	// parent is set on the parts a coll module made of a communicator
	// and on an intercommunicator's local copy: they run the parent's
	// collectives, so the parent's failure and revocation reach them.
	parent   *Comm
	children []*Comm
	// acked is how many of the members known dead AckFailed acknowledged
	// (under ftState.mu).
	acked int
	// agree is the communicator's agreements (agree.go).
	agree agreeState
}

// setupFT makes the failure state and subscribes to the launcher's
// notices of dead ranks and to the PML's notices.
func (i *Instance) setupFT() {
	f := &i.ft
	f.dead = make([]bool, i.Size())
	f.comms = map[uint16]*Comm{}
	f.orphans = map[uint16][]orphan{}
	i.pml.OnNotice(i.onNotice)
	i.rt.OnProcFailed(i.procFailed)
}

// register makes c known to failures and notices: it fails at once when a
// member is known dead, and gets the notices that came before it.
func (i *Instance) registerFT(c *Comm) {
	c.ft.hash = groupHash(c)
	f := &i.ft
	f.mu.Lock()
	f.comms[c.pc.CID] = c
	dead := -1
	for _, w := range f.order {
		if c.hasMember(w) {
			dead = w
			break
		}
	}
	early := f.orphans[c.pc.CID]
	delete(f.orphans, c.pc.CID)
	f.mu.Unlock()
	if dead >= 0 {
		i.failComm(c, dead)
	}
	for _, o := range early {
		i.onNotice(o.src, o.msg)
	}
}

// adoptFT makes part one of parent's hidden communicators: failure and
// revocation of parent reach it.
func (i *Instance) adoptFT(parent, part *Comm) {
	f := &i.ft
	f.mu.Lock()
	part.ft.parent = parent
	parent.ft.children = append(parent.ft.children, part)
	st := parent.ft.state.Load()
	f.mu.Unlock()
	if st&ftFailed != 0 {
		i.interruptComm(part, ftFailed, parent.failedCause())
	}
	if st&ftRevoked != 0 {
		i.interruptComm(part, ftRevoked, parent.revokedCause())
	}
}

// unregisterFT forgets c (Free).
func (i *Instance) unregisterFT(c *Comm) {
	f := &i.ft
	f.mu.Lock()
	if f.comms[c.pc.CID] == c {
		delete(f.comms, c.pc.CID)
	}
	if p := c.ft.parent; p != nil {
		for k, ch := range p.ft.children {
			if ch == c {
				p.ft.children = append(p.ft.children[:k], p.ft.children[k+1:]...)
				break
			}
		}
	}
	f.mu.Unlock()
}

// groupHash is the hash of c's context id and its groups' world ranks.
func groupHash(c *Comm) uint32 {
	h := fnv.New32a()
	var b [4]byte
	put := func(v int) {
		binary.LittleEndian.PutUint32(b[:], uint32(v))
		h.Write(b[:])
	}
	put(int(c.pc.CID))
	for _, g := range []*group.Group{c.pc.Group, c.pc.Local} {
		if g == nil {
			continue
		}
		put(g.Size())
		for r := 0; r < g.Size(); r++ {
			put(g.World(r))
		}
	}
	return h.Sum32()
}

// hasMember reports whether world rank w is in one of c's groups.
func (c *Comm) hasMember(w int) bool {
	if c.pc.Group.Rank(w) != group.Undefined {
		return true
	}
	return c.pc.Local != nil && c.pc.Local.Rank(w) != group.Undefined
}

// procFailed is the launcher's notice that world rank w died (mpirun
// --enable-recovery; mpitest's injected deaths): every communicator
// holding it fails.
func (i *Instance) procFailed(w int) {
	f := &i.ft
	f.delivering.Lock()
	f.mu.Lock()
	if w < 0 || w >= len(f.dead) || f.dead[w] {
		f.mu.Unlock()
		f.delivering.Unlock()
		return
	}
	f.dead[w] = true
	f.order = append(f.order, w)
	f.known.Store(int32(len(f.order)))
	var hit []*Comm
	for _, c := range f.comms {
		if c.hasMember(w) && c.ft.parent == nil {
			hit = append(hit, c)
		}
	}
	f.mu.Unlock()
	for _, c := range hit {
		i.interruptComm(c, ftFailed, c.failedCause())
	}
	if h := i.deliveryHook; h != nil {
		h(w)
	}
	for _, c := range hit {
		i.failAnySource(c, w)
	}
	f.delivering.Unlock()
	for _, c := range hit {
		c.agreeFailed()
	}
	i.pml.Engine().Wake()
}

// isDead reports whether world rank w is known dead.
func (i *Instance) isDead(w int) bool {
	f := &i.ft
	f.mu.Lock()
	defer f.mu.Unlock()
	return w >= 0 && w < len(f.dead) && f.dead[w]
}

// failComm fails c's collectives, and its AnySource receives, for the
// death of world rank w.
func (i *Instance) failComm(c *Comm, w int) {
	i.interruptComm(c, ftFailed, c.failedCause())
	i.failAnySource(c, w)
}

// failAnySource fails c's posted AnySource receives for the death of world
// rank w, when w is in the group they receive from.
func (i *Instance) failAnySource(c *Comm, w int) {
	if c.pc.Local == nil || c.pc.Group.Rank(w) != group.Undefined {
		i.pml.FailAnySource(&c.pc, c.pendingErr("Recv"))
	}
}

// interruptComm sets bit on c and its parts and interrupts their
// operations in the bit's scope with err.
func (i *Instance) interruptComm(c *Comm, bit uint32, err error) {
	scope := pml.ScopeCollective
	if bit == ftRevoked {
		scope = pml.ScopeAll
	}
	c.ft.state.Or(bit)
	i.pml.Interrupt(&c.pc, scope, err)
	i.ft.mu.Lock()
	children := append([]*Comm(nil), c.ft.children...)
	i.ft.mu.Unlock()
	for _, ch := range children {
		i.interruptComm(ch, bit, err)
	}
}

// deadMembers are c's ranks known dead, in the order learned: of its remote
// group on an intercommunicator.
func (c *Comm) deadMembers() []int {
	f := &c.inst.ft
	f.mu.Lock()
	defer f.mu.Unlock()
	return c.deadMembersLocked()
}

func (c *Comm) deadMembersLocked() []int {
	var out []int
	for _, w := range c.inst.ft.order {
		if r := c.pc.Group.Rank(w); r != group.Undefined {
			out = append(out, r)
		}
	}
	return out
}

// describeDead says which of c's members died: "rank 2 (world rank 5)".
func (c *Comm) describeDead() string {
	root := c
	for root.ft.parent != nil {
		root = root.ft.parent
	}
	f := &c.inst.ft
	f.mu.Lock()
	var parts []string
	for _, w := range f.order {
		if root.hasMember(w) {
			r := root.pc.Group.Rank(w)
			if r == group.Undefined {
				parts = append(parts, fmt.Sprintf("world rank %d (of the local group)", w))
			} else {
				parts = append(parts, fmt.Sprintf("rank %d (world rank %d)", r, w))
			}
		}
	}
	f.mu.Unlock()
	if len(parts) == 0 {
		return "a member"
	}
	return strings.Join(parts, ", ")
}

// failedCause is the ErrProcFailed error of c's collectives, without the
// call's name: the PML's interrupted operations carry it, and the call
// that waited in one names itself around it.
func (c *Comm) failedCause() error {
	return mpierr.Errorf(mpierr.ErrProcFailed, "%s of %s failed; Shrink makes a communicator of the survivors",
		c.describeDead(), c.name)
}

// revokedCause is failedCause for a revoked c.
func (c *Comm) revokedCause() error {
	return mpierr.Errorf(mpierr.ErrRevoked, "%s was revoked; Shrink makes a new communicator of its survivors", c.name)
}

// pendingErr is the ErrProcFailedPending error of an AnySource receive
// (call name) on c.
func (c *Comm) pendingErr(name string) error {
	return mpierr.Errorf(mpierr.ErrProcFailedPending, "mpi: %s from AnySource on %s: %s failed and is not acknowledged (AckFailed)",
		name, c.name, c.describeDead())
}

// brokenCause is the cause a collective on c fails with, or nil: one
// atomic load when nothing failed.
func (c *Comm) brokenCause() error {
	st := c.ft.state.Load()
	switch {
	case st == 0:
		return nil
	case st&ftRevoked != 0:
		return c.revokedCause()
	default:
		return c.failedCause()
	}
}

// broken is brokenCause named for the call that finds it at its start.
func (c *Comm) broken(name string) error {
	if err := c.brokenCause(); err != nil {
		return fmt.Errorf("mpi: %s on %s: %w", name, c.name, err)
	}
	return nil
}

// anySourceBlocked returns the ErrProcFailedPending error of an AnySource
// receive on c while a failed member is not acknowledged, or nil.
func (c *Comm) anySourceBlocked(name string) error {
	if c.ft.state.Load()&ftFailed == 0 {
		return nil
	}
	f := &c.inst.ft
	f.mu.Lock()
	unacked := len(c.deadMembersLocked()) > c.ft.acked
	f.mu.Unlock()
	if unacked {
		return c.pendingErr(name)
	}
	return nil
}

// Failed returns the group of c's members known dead, in the order this
// process learned of them (ULFM's MPIX_Comm_get_failed); of the remote
// group on an intercommunicator. Processes learn of deaths at different
// moments: Agree or Shrink give every survivor the same view.
func (c *Comm) Failed() (*Group, error) {
	if err := c.checkFT("Failed"); err != nil {
		return nil, err
	}
	g, err := c.inst.groups.ops.Incl(c.pc.Group, c.deadMembers())
	if err != nil {
		return nil, fmt.Errorf("mpi: Failed on %s: %w", c.name, err)
	}
	return newGroup(c.inst.groups.ops, g), nil
}

// AckFailed acknowledges the failures of c's members known now (ULFM's
// MPIX_Comm_ack_failed) and returns how many are acknowledged: AnySource
// receives, which fail with ErrProcFailedPending while a failure is not
// acknowledged, work again until the next one.
func (c *Comm) AckFailed() (int, error) {
	if err := c.checkFT("AckFailed"); err != nil {
		return 0, err
	}
	f := &c.inst.ft
	f.delivering.Lock()
	defer f.delivering.Unlock()
	f.mu.Lock()
	c.ft.acked = len(c.deadMembersLocked())
	n := c.ft.acked
	f.mu.Unlock()
	return n, nil
}

// IsRevoked reports whether c was revoked, here or by another member.
func (c *Comm) IsRevoked() bool { return c != nil && c.ft.state.Load()&ftRevoked != 0 }

// checkFT is check for the calls that work on a failed or revoked
// communicator.
func (c *Comm) checkFT(name string) error {
	if err := c.check(name); err != nil {
		return err
	}
	if c.ft.parent != nil {
		return mpierr.Errorf(mpierr.ErrComm, "mpi: %s on %s: a hidden part of a communicator", name, c.name)
	}
	return nil
}

// Revoke revokes c on every member (ULFM's MPIX_Comm_revoke): every
// pending and later operation on c, point-to-point and collective, fails
// with ErrRevoked, here at once and on the others as the notice reaches
// them, also while they wait on live peers. Agree, Shrink, Failed and
// AckFailed still work on a revoked communicator; Free releases it. It is
// not collective: any one member may call it, and several may.
func (c *Comm) Revoke() error {
	if err := c.checkFT("Revoke"); err != nil {
		return err
	}
	c.inst.revoke(c, c.inst.Rank())
	return nil
}

// revoke revokes c here and, the first time, forwards the notice to every
// other member: each member forwards it once, so that it reaches everyone
// even when the revoker dies half-way through telling them.
func (i *Instance) revoke(c *Comm, from int) {
	f := &i.ft
	f.mu.Lock()
	first := c.ft.state.Load()&ftRevoked == 0
	if first {
		c.ft.state.Or(ftRevoked)
	}
	f.mu.Unlock()
	if !first {
		return
	}
	i.interruptComm(c, ftRevoked, c.revokedCause())
	msg := noticeHeader(noticeRevoke, c)
	for _, w := range c.otherMembers() {
		if w != from && !i.isDead(w) {
			i.pml.Notify(w, msg) // a member lost meanwhile needs no notice
		}
	}
}

// otherMembers are the world ranks of c's members but this process.
func (c *Comm) otherMembers() []int {
	me := c.inst.Rank()
	var out []int
	for _, g := range []*group.Group{c.pc.Group, c.pc.Local} {
		if g == nil {
			continue
		}
		for r := 0; r < g.Size(); r++ {
			if w := g.World(r); w != me {
				out = append(out, w)
			}
		}
	}
	sort.Ints(out)
	return out
}

// Notices: kind:u8 cid:u16 hash:u32, then the kind's body.
const (
	noticeRevoke  = 1
	noticeContrib = 2 // agree.go
	noticeDecide  = 3 // agree.go
	noticeHdrLen  = 7
)

// noticeHeader starts a notice of kind about c.
func noticeHeader(kind byte, c *Comm) []byte {
	b := make([]byte, noticeHdrLen, 64)
	b[0] = kind
	binary.LittleEndian.PutUint16(b[1:], c.pc.CID)
	binary.LittleEndian.PutUint32(b[3:], c.ft.hash)
	return b
}

// onNotice handles a notice from world rank src. It runs inside progress.
// A notice for a communicator this process has not made yet waits for it;
// one whose hash does not match the communicator of its id (a notice for a
// freed one, late) is dropped.
func (i *Instance) onNotice(src int, msg []byte) {
	if len(msg) < noticeHdrLen {
		return
	}
	cid := binary.LittleEndian.Uint16(msg[1:])
	hash := binary.LittleEndian.Uint32(msg[3:])
	f := &i.ft
	f.mu.Lock()
	c := f.comms[cid]
	if c == nil {
		if msg[0] == noticeDecide {
			// Not kept: a decision for a communicator not made here yet
			// comes again, as the answer to this rank's contribution,
			// and a late one for a freed communicator must not reach a
			// new one with the same id and members.
			f.mu.Unlock()
			return
		}
		if n := len(f.orphans[cid]); n < maxOrphans {
			f.orphans[cid] = append(f.orphans[cid], orphan{src, append([]byte(nil), msg...)})
		}
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	if c.ft.hash != hash {
		return
	}
	switch msg[0] {
	case noticeRevoke:
		i.revoke(c, src)
	case noticeContrib, noticeDecide:
		c.agreeNotice(src, msg[0], msg[noticeHdrLen:])
	}
}

func init() {
	mpihook.Crash = func(inst any) { inst.(*Instance).crash() }
	mpihook.LLPs = func(inst any) []llp.Module { return inst.(*Instance).llps }
}

// crash is mpihook.Crash: the instance stops as a killed process would.
func (i *Instance) crash() {
	i.mu.Lock()
	i.finalized = true
	i.mu.Unlock()
	i.down.Store(true)
	i.finalizeNBC()
	// A dead process's children (coll plugins) go with it.
	i.collTables.finalizeAll()
	i.finalizeLayers()
	i.base.Close()
}

// guardedTransport is c's point-to-point for an algorithm among members
// (CreateGroup's light-weight group): user tags, which a member's death
// does not interrupt (only collectives' are), so its receives give up
// themselves once any member is known dead. A member that waits on a live
// one whose own wait failed would otherwise wait for ever.
type guardedTransport struct {
	*Comm
	worlds []int // the members' world ranks
}

func (c *Comm) guarded(members []int) guardedTransport {
	worlds := make([]int, len(members))
	for k, r := range members {
		worlds[k] = c.pc.Group.World(r)
	}
	return guardedTransport{c, worlds}
}

// lost returns the ErrProcFailed error of a member known dead, or nil.
func (t guardedTransport) lost() error {
	f := &t.inst.ft
	if f.known.Load() == 0 {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range t.worlds {
		if f.dead[w] {
			return mpierr.Errorf(mpierr.ErrProcFailed, "world rank %d, a member, failed", w)
		}
	}
	return nil
}

func (t guardedTransport) Recv(buf []byte, src, tag int) (pml.Status, error) {
	req, err := t.Irecv(buf, src, tag)
	if err != nil {
		return pml.Status{Err: err}, err
	}
	return t.wait(req)
}

func (t guardedTransport) Sendrecv(sbuf []byte, dst, stag int, rbuf []byte, src, rtag int) (pml.Status, error) {
	req, err := t.Irecv(rbuf, src, rtag)
	if err != nil {
		return pml.Status{Err: err}, err
	}
	if err := t.Send(sbuf, dst, stag); err != nil {
		req.Cancel()
		return pml.Status{Err: err}, err
	}
	return t.wait(req)
}

// wait waits for req, or until a member is known dead: then the receive is
// taken back, unless it matched meanwhile.
func (t guardedTransport) wait(req *Request) (pml.Status, error) {
	err := t.inst.pml.Engine().Until(nil, func() bool { return req.Done() || t.lost() != nil })
	if err == nil && !req.Done() {
		if lerr := t.lost(); lerr != nil && req.Cancel() {
			return pml.Status{Err: lerr}, lerr
		}
	}
	if err != nil {
		req.Cancel()
		return pml.Status{Err: err}, err
	}
	return req.Wait()
}
