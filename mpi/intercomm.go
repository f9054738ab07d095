package mpi

import (
	"fmt"

	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/group"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mpierr"
)

// Root is what the root passes as root of a rooted collective on an
// intercommunicator (MPI_ROOT); the other ranks of its group pass ProcNull,
// and the ranks of the other group the root's rank there.
const Root = coll.Root

// tagMerge is the reserved tag of the exchanges between the two groups'
// leaders on an intercommunicator (Merge): below the user's tags, above
// the collectives'.
const tagMerge = -901

// IsInter reports whether c is an intercommunicator.
func (c *Comm) IsInter() bool { return c != nil && c.pc.Local != nil }

// RemoteSize is the size of an intercommunicator's remote group; 0 on an
// intracommunicator.
func (c *Comm) RemoteSize() int {
	if !c.IsInter() {
		return 0
	}
	return c.pc.Size
}

// RemoteGroup returns an intercommunicator's remote group; nil on an
// intracommunicator.
func (c *Comm) RemoteGroup() *Group {
	if !c.IsInter() {
		return nil
	}
	return newGroup(c.inst.groups.ops, c.pc.Group)
}

// intraOnly refuses an operation that gompi implements on
// intracommunicators only.
func (c *Comm) intraOnly(op string) error {
	if err := c.check(op); err != nil {
		return err
	}
	if c.IsInter() {
		return mpierr.Errorf(mpierr.ErrComm, "mpi: %s on %s: not implemented on intercommunicators", op, c.name)
	}
	return nil
}

// interColl is an intercommunicator as coll's algorithms see it.
type interColl struct{ collComm }

func (x interColl) Size() int       { return x.c.Size() }
func (x interColl) RemoteSize() int { return x.c.pc.Size }
func (x interColl) Local() coll.Comm {
	return collComm{x.c.local}
}
func (x interColl) LLP() bool { return false }

// IntercommCreate makes an intercommunicator between c's group and another,
// disjoint group (MPI_Intercomm_create). Every rank of c calls it; the
// leaders, localLeader of c and remoteLeader of peer (in peer's ranks),
// talk over peer with tag, which must not be in use between them there.
// The other group's ranks call it likewise with their own communicator.
func (c *Comm) IntercommCreate(localLeader int, peer *Comm, remoteLeader, tag int) (*Comm, error) {
	const op = "IntercommCreate"
	if err := c.intraOnly(op); err != nil {
		return nil, err
	}
	if localLeader < 0 || localLeader >= c.Size() {
		return nil, mpierr.Errorf(mpierr.ErrRank, "mpi: %s on %s: local leader %d: accepted: 0 to %d", op, c.name, localLeader, c.Size()-1)
	}
	leader := c.Rank() == localLeader
	if leader {
		if err := peer.checkSend(op, remoteLeader, tag); err != nil {
			return nil, err
		}
	}
	fail := func(err error) (*Comm, error) { return nil, fmt.Errorf("mpi: %s on %s: %w", op, c.name, err) }
	// The leaders swap their groups' world ranks; each tells its group.
	swapPeer := func(mine, theirs []int64) error {
		_, err := Sendrecv(peer, mine, remoteLeader, tag, theirs, remoteLeader, tag)
		return err
	}
	b := bridge{local: c, leader: localLeader, swap: swapPeer}
	sizes, err := b.exchange([]int64{int64(c.Size())})
	if err != nil {
		return fail(err)
	}
	remoteWorld := make([]int64, sizes[0])
	if leader {
		mine := make([]int64, c.Size())
		for r := range mine {
			mine[r] = int64(c.pc.Group.World(r))
		}
		if err := swapPeer(mine, remoteWorld); err != nil {
			return fail(err)
		}
	}
	if err := Bcast(c, remoteWorld, localLeader); err != nil {
		return fail(err)
	}
	ranks := make([]int, len(remoteWorld))
	for i, w := range remoteWorld {
		ranks[i] = int(w)
		if c.pc.Group.Rank(int(w)) != group.Undefined {
			return fail(mpierr.Errorf(mpierr.ErrGroup, "world rank %d is in both groups: an intercommunicator joins disjoint groups", w))
		}
	}
	remote, err := c.inst.groups.ops.Incl(c.inst.groups.world, ranks)
	if err != nil {
		return fail(err)
	}
	cid, err := c.agreeCIDAcross(b)
	if err != nil {
		return fail(err)
	}
	nc, err := c.inst.newInterComm(uint16(cid), c, remote, fmt.Sprintf("%s.inter(%d)", c.name, cid))
	if err != nil {
		c.inst.cids.set(cid, false)
		return fail(err)
	}
	return nc, nil
}

// newInterComm makes an intercommunicator between local's group and
// remote, with its own copy of local for the local phases of collectives.
func (i *Instance) newInterComm(cid uint16, local *Comm, remote *group.Group, name string) (*Comm, error) {
	lc, err := local.Dup()
	if err != nil {
		return nil, err
	}
	lc.name = name + ".local"
	c := &Comm{inst: i, name: name, local: lc}
	c.pc = pml.Comm{CID: cid, Group: remote, Rank: local.pc.Rank, Size: remote.Size(), Local: local.pc.Group}
	if err := i.pml.AddComm(&c.pc); err != nil {
		lc.Free()
		return nil, fmt.Errorf("mpi: %s: %w", name, err)
	}
	i.registerFT(c)
	i.adoptFT(c, lc)
	t, err := coll.ResolveInter(i.base, interColl{collComm{c}})
	if err != nil {
		i.unregisterFT(c)
		i.pml.DelComm(&c.pc)
		lc.Free()
		return nil, fmt.Errorf("mpi: %s: %w", name, err)
	}
	c.coll = t
	i.collTables.keep(t)
	return c, nil
}

// Merge makes an intracommunicator of both groups of an intercommunicator
// (MPI_Intercomm_merge): the group whose ranks pass high false comes first;
// when both pass the same, the group whose rank 0 has the lower world rank
// does. Every rank of both groups calls it; the ranks of one group pass the
// same high.
func (c *Comm) Merge(high bool) (*Comm, error) {
	const op = "Merge"
	if err := c.check(op); err != nil {
		return nil, err
	}
	if !c.IsInter() {
		return nil, mpierr.Errorf(mpierr.ErrComm, "mpi: %s on %s: not an intercommunicator", op, c.name)
	}
	fail := func(err error) (*Comm, error) { return nil, fmt.Errorf("mpi: %s on %s: %w", op, c.name, err) }
	b := bridge{local: c.local, leader: 0, swap: func(mine, theirs []int64) error {
		st, err := collComm{c}.Sendrecv(datatype.Bytes(mine), 0, tagMerge, datatype.Bytes(theirs), 0, tagMerge)
		if err == nil && st.Count != 8*len(theirs) {
			err = mpierr.Errorf(mpierr.ErrCount, "the other group's leader sent %d bytes, want %d", st.Count, 8*len(theirs))
		}
		return err
	}}
	flag := int64(0)
	if high {
		flag = 1
	}
	theirs, err := b.exchange([]int64{flag})
	if err != nil {
		return fail(err)
	}
	localFirst := flag < theirs[0] || (flag == theirs[0] && c.pc.Local.World(0) < c.pc.Group.World(0))
	first, second := c.pc.Local, c.pc.Group
	if !localFirst {
		first, second = second, first
	}
	g, err := c.inst.groups.ops.Union(first, second)
	if err != nil {
		return fail(err)
	}
	cid, err := c.local.agreeCIDAcross(b)
	if err != nil {
		return fail(err)
	}
	nc, err := c.inst.newComm(uint16(cid), g, fmt.Sprintf("%s.merge(%d)", c.name, cid))
	if err != nil {
		c.inst.cids.set(cid, false)
		return fail(err)
	}
	return nc, nil
}

// bridge joins two groups for an agreement: the leader of the local
// communicator swaps values with the other group's leader, and tells its
// group.
type bridge struct {
	local  *Comm
	leader int
	swap   func(mine, theirs []int64) error
}

// exchange gives every local rank the other group's values for the
// leader's mine.
func (b bridge) exchange(mine []int64) ([]int64, error) {
	theirs := make([]int64, len(mine))
	if b.local.Rank() == b.leader {
		if err := b.swap(mine, theirs); err != nil {
			return nil, err
		}
	}
	if err := Bcast(b.local, theirs, b.leader); err != nil {
		return nil, err
	}
	return theirs, nil
}

// agreeCIDAcross finds a context id free in every process of both groups,
// as agreeCID does in one: each group reduces, the leaders combine, and
// both groups follow the same steps to the same id.
func (c *Comm) agreeCIDAcross(b bridge) (int, error) {
	ids := &c.inst.cids
	from := 2
	for {
		mine := ids.lowestFreeFrom(from)
		if mine < 0 {
			mine = maxCID + 1
		}
		lo, _, err := reduceMaxAll(c.allMax, mine, true)
		if err != nil {
			return 0, err
		}
		theirs, err := b.exchange([]int64{int64(lo)})
		if err != nil {
			return 0, err
		}
		cid := max(lo, int(theirs[0]))
		if cid > maxCID {
			return 0, mpierr.Errorf(mpierr.ErrIntern, "mpi: no free context id: %d communicators exist", maxCID+1)
		}
		held := ids.reserve(cid)
		_, freeHere, err := reduceMaxAll(c.allMax, cid, held)
		notFree := int64(1)
		if freeHere {
			notFree = 0
		}
		var there []int64
		if err == nil {
			there, err = b.exchange([]int64{notFree})
		}
		if err == nil && freeHere && there[0] == 0 {
			return cid, nil
		}
		if held {
			ids.set(cid, false)
		}
		if err != nil {
			return 0, err
		}
		from = cid + 1
	}
}
