package han

import (
	"slices"

	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mpierr"
)

// The operations. Every rank runs the node phases of its node in the same
// order, and every leader the leaders' phases; which phases a rank runs
// depends only on arguments every rank agrees on (root, sizes), so ranks
// never wait for a phase a peer skips.

// passBelow hands a call han does not take to the module below.
func (m *module) passBelow(c coll.Comm, a *coll.Args) error {
	f := m.below[a.Op]
	if f == nil {
		return mpierr.Errorf(mpierr.ErrComponentNotFound, "coll han: %s on %s: han does not run this call (empty, larger than "+
			"coll_han_gather_max_bytes, or a non-commutative op on nodes whose ranks are not consecutive) and no module below it fills %s", a.Op, c.Name(), a.Op)
	}
	return f(c, a)
}

// keepsOrder reports whether han's reductions give rank order for a's op.
func (m *module) keepsOrder(a *coll.Args) bool {
	return a.Reducer.Commutative() || m.consecutive
}

// barrier: every rank of a node arrives, the leaders meet, then the node's
// ranks are let go by their leader.
func (m *module) barrier(c coll.Comm, a *coll.Args) error {
	p, err := m.setup(c)
	if err != nil {
		return err
	}
	f := m.enter()
	defer m.leave(f)
	if err := p.low(coll.Barrier, coll.Barrier, f.args(coll.Args{})); err != nil {
		return err
	}
	if p.leaders != nil {
		if err := p.up(coll.Barrier, coll.Barrier, f.args(coll.Args{})); err != nil {
			return err
		}
	}
	return p.low(coll.Barrier, coll.Barrier, f.args(coll.Args{}))
}

// bcast: the leaders' bcast from the root's node, then each node's from
// its leader, segment by segment. A root that is not its node's leader
// first bcasts within its node, which then needs no second node phase.
func (m *module) bcast(c coll.Comm, a *coll.Args) error {
	if len(a.Recv) == 0 {
		return m.passBelow(c, a)
	}
	p, err := m.setup(c)
	if err != nil {
		return err
	}
	f := m.enter()
	defer m.leave(f)
	me, buf := c.Rank(), a.Recv
	if m.bcastSpreads(len(buf)) {
		return m.spreadBcast(c, p, f, a)
	}
	k, k0 := m.node[me], m.node[a.Root]
	segs := f.segments(len(buf), 1, m.segment)
	start := func(lo, hi int) (func() error, error) {
		return p.startUp(coll.Bcast, coll.Bcast, f.args(coll.Args{Recv: buf[lo:hi], Root: k0}), len(segs) == 2)
	}
	then := func(lo, hi int) error {
		return p.low(coll.Bcast, coll.Bcast, f.args(coll.Args{Recv: buf[lo:hi]}))
	}
	if k == k0 && a.Root != m.leader(k0) {
		// The root's node has the data once its own bcast is done; its
		// leader still cuts the leaders' bcast as every leader does.
		if err := p.low(coll.Bcast, coll.Bcast, f.args(coll.Args{Recv: buf, Root: m.local[a.Root]})); err != nil {
			return err
		}
		then = nil
	}
	return pipeline(p, segs, nil, then, start)
}

// spreadBcast is bcast with every rank in the network phase: the buffer is
// cut into one piece per rank of a node; the root hands each rank of its
// node that rank's piece first, then the rest; every rank bcasts its piece
// to the ranks in its place on the other nodes, and the ranks of those
// nodes trade their pieces. The network carries the buffer once a node,
// as from one leader, but from every rank of the root's node at once.
func (m *module) spreadBcast(c coll.Comm, p *parts, f *frame, a *coll.Args) error {
	cut := m.cutBcast(c, a)
	tag := ownTag(coll.Bcast)
	reqs := a.Requests()
	defer func() { a.PutRequests(reqs) }()
	err := postMessages(&reqs, p.node, cut.handOut(), tag)
	// A rank of the root's node needs its own piece, which comes first,
	// for its network phase; the rest arrives meanwhile.
	if err == nil && cut.k == cut.k0 && c.Rank() != a.Root && len(reqs) > 0 && len(cut.piece(cut.j)) > 0 {
		err = coll.WaitAll(p.node, reqs[0])
		reqs = append(reqs[:0], reqs[1:]...)
	}
	if err == nil {
		err = p.peers.Call(coll.Bcast, f.args(coll.Args{Recv: cut.piece(cut.j), Root: cut.k0}))
	}
	if err == nil {
		err = postMessages(&reqs, p.node, cut.trade(), tag)
	}
	if werr := coll.WaitAll(p.node, reqs...); err == nil {
		err = werr
	}
	return err
}

// bcastCut is one rank's part of a spread bcast: the buffer's pieces, one
// per rank of a node, and where this rank and the root are.
type bcastCut struct {
	buf          []byte
	off, length  []int
	root         bool
	k, j, k0, j0 int
	ppn          int
}

func (m *module) cutBcast(c coll.Comm, a *coll.Args) *bcastCut {
	me := c.Rank()
	b := &bcastCut{buf: a.Recv, root: me == a.Root, k: m.node[me], j: m.local[me], k0: m.node[a.Root], j0: m.local[a.Root], ppn: m.perNode}
	b.off, b.length = coll.Blocks(len(a.Recv), 1, b.ppn)
	return b
}

func (b *bcastCut) piece(i int) []byte { return b.buf[b.off[i] : b.off[i]+b.length[i]] }

// handOut is the root's node's messages: the root sends each rank of its
// node that rank's piece first (its network phase needs it), then the
// rest, and they receive them in that order. None elsewhere.
func (b *bcastCut) handOut() []message {
	var msgs []message
	switch {
	case b.root:
		for i := 0; i < b.ppn; i++ {
			if i != b.j {
				msgs = append(msgs, message{send: true, buf: b.piece(i), peer: i})
			}
		}
		for i := 0; i < b.ppn; i++ {
			for h := 0; h < b.ppn && i != b.j; h++ {
				if h != i {
					msgs = append(msgs, message{send: true, buf: b.piece(h), peer: i})
				}
			}
		}
	case b.k == b.k0:
		msgs = append(msgs, message{buf: b.piece(b.j), peer: b.j0})
		for h := 0; h < b.ppn; h++ {
			if h != b.j {
				msgs = append(msgs, message{buf: b.piece(h), peer: b.j0})
			}
		}
	}
	return msgs
}

// trade is the other nodes' messages after the network phase: each rank
// sends its piece to the others of its node and receives theirs.
func (b *bcastCut) trade() []message {
	if b.k == b.k0 {
		return nil
	}
	var msgs []message
	for i := 0; i < b.ppn; i++ {
		if i != b.j {
			msgs = append(msgs, message{buf: b.piece(i), peer: i}, message{send: true, buf: b.piece(b.j), peer: i})
		}
	}
	return msgs
}

// reduce: each node reduces to its leader, the leaders reduce to the root's
// node's leader, segment by segment, and that leader hands the result to
// the root when the root is another rank.
func (m *module) reduce(c coll.Comm, a *coll.Args) error {
	n := len(a.Input())
	if n == 0 || !m.keepsOrder(a) {
		return m.passBelow(c, a)
	}
	p, err := m.setup(c)
	if err != nil {
		return err
	}
	f := m.enter()
	defer m.leave(f)
	me := c.Rank()
	k, k0 := m.node[me], m.node[a.Root]
	rootLeader := m.leader(k0)
	in := a.Input()
	unit := a.Reducer.Size
	segs := f.segments(n, unit, m.segment)

	// acc is where a leader's node result goes; spare takes what a rank
	// must pass as a receive buffer but does not keep.
	var acc []byte
	if me == a.Root {
		acc = a.Recv
	} else {
		acc = a.Scratch.Get(n)
		defer a.Scratch.Put(acc)
	}
	spare := a.Scratch.Get(n)
	defer a.Scratch.Put(spare)

	first := func(lo, hi int) error {
		na := f.args(coll.Args{Send: in[lo:hi], Recv: spare[lo:hi], Reducer: a.Reducer})
		if p.leaders != nil {
			na.Recv = acc[lo:hi]
			if me == a.Root && a.InPlace {
				na.Send, na.InPlace = nil, true
			}
		}
		return p.low(coll.Reduce, coll.Reduce, na)
	}
	start := func(lo, hi int) (func() error, error) {
		ua := f.args(coll.Args{Send: acc[lo:hi], Recv: spare[lo:hi], Root: k0, Reducer: a.Reducer})
		if k == k0 {
			ua.Send, ua.Recv, ua.InPlace = nil, acc[lo:hi], true
		}
		return p.startUp(coll.Reduce, coll.Reduce, ua, len(segs) == 2)
	}
	if err := pipeline(p, segs, first, nil, start); err != nil {
		return err
	}
	return m.handToRoot(p, me, a, rootLeader, acc)
}

// handToRoot ends a rooted operation whose result is at the root's node's
// leader (result there) when the root is another rank of that node: the
// leader sends it, the root receives it into Recv.
func (m *module) handToRoot(p *parts, me int, a *coll.Args, rootLeader int, result []byte) error {
	switch {
	case a.Root == rootLeader:
		return nil
	case me == rootLeader:
		return p.node.Send(result, m.local[a.Root], ownTag(a.Op))
	case me == a.Root:
		return coll.RecvExactly(p.node, a.Recv, 0, ownTag(a.Op))
	}
	return nil
}

// allreduce: each node reduces to its leader, the leaders allreduce, each
// leader bcasts within its node; segment by segment, a segment's leaders'
// allreduce running while the next segment's node reduce does.
func (m *module) allreduce(c coll.Comm, a *coll.Args) error {
	n := len(a.Recv)
	if n == 0 || !m.keepsOrder(a) {
		return m.passBelow(c, a)
	}
	p, err := m.setup(c)
	if err != nil {
		return err
	}
	f := m.enter()
	defer m.leave(f)
	if m.spreads(n) {
		return m.spreadAllreduce(c, p, f, a)
	}
	in := a.Input()
	segs := f.segments(n, a.Reducer.Size, m.segment)
	var spare []byte
	if p.leaders == nil {
		spare = a.Scratch.Get(min(n, segs[1]))
		defer a.Scratch.Put(spare)
	}
	first := func(lo, hi int) error {
		if p.leaders != nil {
			na := f.args(coll.Args{Send: a.Send, Recv: a.Recv[lo:hi], InPlace: a.InPlace, Reducer: a.Reducer})
			if !a.InPlace {
				na.Send = a.Send[lo:hi]
			}
			return p.low(coll.Allreduce, coll.Reduce, na)
		}
		return p.low(coll.Allreduce, coll.Reduce, f.args(coll.Args{Send: in[lo:hi], Recv: spare[:hi-lo], Reducer: a.Reducer}))
	}
	start := func(lo, hi int) (func() error, error) {
		return p.startUp(coll.Allreduce, coll.Allreduce, f.args(coll.Args{Recv: a.Recv[lo:hi], InPlace: true, Reducer: a.Reducer}), len(segs) == 2)
	}
	then := func(lo, hi int) error {
		return p.low(coll.Allreduce, coll.Bcast, f.args(coll.Args{Recv: a.Recv[lo:hi]}))
	}
	return pipeline(p, segs, first, then, start)
}

// spreadAllreduce is allreduce with every rank in the network phase: the
// ranks of a node cut the buffer into one block each, every rank reduces
// its block of the node's inputs (sent to it by the others), allreduces it
// with the ranks in its place on the other nodes, and the node gathers the
// blocks. The network carries what one leader per node would send, from
// every rank at once, and the node phases move each byte once.
func (m *module) spreadAllreduce(c coll.Comm, p *parts, f *frame, a *coll.Args) error {
	parts := a.Scratch.Get(m.spreadScratch(a))
	defer a.Scratch.Put(parts)
	s := m.cutSpread(c, a, parts)
	tag := ownTag(coll.Allreduce)
	reqs := a.Requests()
	defer func() { a.PutRequests(reqs) }()
	err := postMessages(&reqs, p.node, s.exchange(), tag)
	if werr := coll.WaitAll(p.node, reqs...); err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	s.fold()
	if err := p.peers.Call(coll.Allreduce, f.args(coll.Args{Recv: s.acc, InPlace: true, Reducer: a.Reducer})); err != nil {
		return err
	}
	return p.node.Call(coll.Allgatherv, f.args(coll.Args{Recv: a.Recv, InPlace: true, Counts: s.length, Displs: s.off}))
}

// spreads, bcastSpreads and gatherSpreads report whether an allreduce or
// bcast of n bytes, or an allgather(v) of total bytes over size ranks,
// spreads its network phase (the peers' parts exist whenever one can).
func (m *module) spreads(n int) bool { return m.perNode > 1 && m.spread > 0 && n >= m.spread }

func (m *module) bcastSpreads(n int) bool {
	return m.perNode > 1 && m.bcastSpread > 0 && n >= m.bcastSpread
}

func (m *module) gatherSpreads(total, size int) bool {
	return m.perNode > 1 && m.gatherSpread > 0 && total >= m.gatherSpread*size
}

// spreadCut is one rank's part of a spread allreduce: the node's blocks
// (off, length), this rank's block of the result (acc) and of its input
// (own), and where the other ranks' inputs for its block arrive.
type spreadCut struct {
	a           *coll.Args
	j, last     int
	off, length []int
	own, acc    []byte
	// parts[i] is node rank i's contribution to this rank's block. One of
	// them (direct) goes straight into acc when acc is not this rank's own
	// input (in place) and the reduction may start from it: any one for a
	// commutative op, the last rank's otherwise; -1 for none.
	parts  []byte
	direct int
}

// message is one send or receive of a node exchange.
type message struct {
	send bool
	buf  []byte
	peer int
}

// spreadScratch is the bytes of scratch a spread allreduce's cut needs.
func (m *module) spreadScratch(a *coll.Args) int {
	_, length := coll.Blocks(len(a.Recv), a.Reducer.Size, m.perNode)
	return m.perNode * slices.Max(length)
}

// cutSpread cuts a's buffers for this rank, parts (spreadScratch bytes)
// holding the others' inputs.
func (m *module) cutSpread(c coll.Comm, a *coll.Args, parts []byte) *spreadCut {
	ppn, j := m.perNode, m.local[c.Rank()]
	s := &spreadCut{a: a, j: j, last: ppn - 1, direct: -1}
	in := a.Input()
	s.off, s.length = coll.Blocks(len(a.Recv), a.Reducer.Size, ppn)
	mine := s.length[j]
	s.own = in[s.off[j] : s.off[j]+mine]
	s.acc = a.Recv[s.off[j] : s.off[j]+mine]
	s.parts = parts[:ppn*mine]
	if !a.InPlace {
		switch {
		case j != s.last:
			s.direct = s.last
		case a.Reducer.Commutative() && ppn > 1:
			s.direct = s.last - 1
		}
	}
	return s
}

// part is node rank i's contribution to this rank's block, where it
// arrives.
func (s *spreadCut) part(i int) []byte {
	if i == s.direct {
		return s.acc
	}
	mine := len(s.acc)
	return s.parts[i*mine : (i+1)*mine]
}

// exchange is the node's messages: each other rank's contribution to this
// rank's block received, this rank's input for theirs sent.
func (s *spreadCut) exchange() []message {
	in := s.a.Input()
	var msgs []message
	for i := 0; i <= s.last; i++ {
		if i != s.j {
			msgs = append(msgs, message{buf: s.part(i), peer: i})
		}
	}
	for i := 0; i <= s.last; i++ {
		if i != s.j {
			msgs = append(msgs, message{send: true, buf: in[s.off[i] : s.off[i]+s.length[i]], peer: i})
		}
	}
	return msgs
}

// fold reduces the node's inputs for this rank's block into acc, once the
// exchange is done (every send complete: Recv may be written). In node
// rank order, for ops that are not commutative: x0 op (x1 op (… op
// x(last))), each x read where it is (this rank's in its input) rather
// than copied together first: at 1 MiB on 2 × 2 ranks those copies were a
// third of the node phase's bytes.
func (s *spreadCut) fold() {
	a, acc, last, j := s.a, s.acc, s.last, s.j
	mine := len(acc)
	x := func(i int) []byte {
		if i == j {
			return s.own
		}
		return s.parts[i*mine : (i+1)*mine]
	}
	// held is the input acc holds already: the one received into it, or
	// this rank's own in place; -1 for none.
	held := s.direct
	if a.InPlace {
		held = j
	}
	switch {
	case held >= 0 && (held == last || a.Reducer.Commutative()):
		// The rest in order, or, commutative, in any.
		for i := last; i >= 0; i-- {
			if i != held {
				a.Reducer.Apply(x(i), acc)
			}
		}
	case held < 0:
		// Not in place, this rank its node's last, the op not commutative.
		datatype.CopyCached(acc, s.own)
		for i := last - 1; i >= 0; i-- {
			a.Reducer.Apply(x(i), acc)
		}
	default:
		// In place and not commutative: acc holds x(j), which the order
		// needs later; kept aside.
		datatype.CopyCached(s.parts[j*mine:(j+1)*mine], s.own)
		datatype.CopyCached(acc, s.parts[last*mine:])
		for i := last - 1; i >= 0; i-- {
			a.Reducer.Apply(s.parts[i*mine:(i+1)*mine], acc)
		}
	}
}

// packed returns, for blocks of counts[r] bytes per rank, each node's
// offset and length in the node-by-node packing the leaders exchange, and
// each rank's offset there.
func (m *module) packed(f *frame, counts func(r int) int) (nodeOff, nodeLen, rankOff []int, total int) {
	f.nodeOff, f.nodeLen = ints(f.nodeOff, len(m.nodes)), ints(f.nodeLen, len(m.nodes))
	f.rankOff = ints(f.rankOff, len(m.node))
	nodeOff, nodeLen, rankOff = f.nodeOff, f.nodeLen, f.rankOff
	for k, ranks := range m.nodes {
		nodeOff[k] = total
		for _, r := range ranks {
			rankOff[r] = total
			total += counts(r)
		}
		nodeLen[k] = total - nodeOff[k]
	}
	return nodeOff, nodeLen, rankOff, total
}

// nodeLayout is node k's part of a packing: its ranks' offsets within the
// node's block and their lengths.
func (m *module) nodeLayout(f *frame, k int, counts func(r int) int, rankOff []int) (displs, lens []int) {
	base := rankOff[m.nodes[k][0]]
	displs, lens = f.displs[:0], f.lens[:0]
	for _, r := range m.nodes[k] {
		displs, lens = append(displs, rankOff[r]-base), append(lens, counts(r))
	}
	f.displs, f.lens = displs, lens
	return displs, lens
}

// gather: each node gathers to its leader, the leaders gather the nodes'
// blocks to the root's node's leader, which puts them in rank order and
// hands them to the root when the root is another rank.
func (m *module) gather(c coll.Comm, a *coll.Args) error {
	size, me := c.Size(), c.Rank()
	block := len(a.Send)
	if a.InPlace {
		block = len(a.Recv) / size
	}
	if block == 0 || m.gatherMax > 0 && block > m.gatherMax {
		return m.passBelow(c, a)
	}
	p, err := m.setup(c)
	if err != nil {
		return err
	}
	f := m.enter()
	defer m.leave(f)
	k, k0 := m.node[me], m.node[a.Root]
	rootLeader := m.leader(k0)
	mine := a.Send
	if a.InPlace {
		mine = a.Recv[me*block : (me+1)*block]
	}
	each := func(int) int { return block }
	nodeOff, nodeLen, rankOff, total := m.packed(f, each)

	// The result in rank order (res) and the leaders' packing (all): the
	// same buffer when the nodes are consecutive, since node by node is
	// then rank order.
	var res, all, nodeBuf []byte
	if me == rootLeader {
		if me == a.Root {
			res = a.Recv
		} else {
			res = a.Scratch.Get(total)
			defer a.Scratch.Put(res)
		}
		all = res
		if !m.consecutive {
			all = a.Scratch.Get(total)
			defer a.Scratch.Put(all)
		}
		nodeBuf = all[nodeOff[k] : nodeOff[k]+nodeLen[k]]
	} else if p.leaders != nil {
		nodeBuf = a.Scratch.Get(nodeLen[k])
		defer a.Scratch.Put(nodeBuf)
	}
	na := f.args(coll.Args{Send: mine, Recv: nodeBuf})
	if me == a.Root && a.InPlace && m.consecutive && me == rootLeader {
		na.Send, na.InPlace = nil, true // the root's block is where the node's block starts
	}
	if err := p.low(coll.Gather, coll.Gather, na); err != nil {
		return err
	}
	if p.leaders != nil {
		ua := f.args(coll.Args{Send: nodeBuf, Root: k0, Counts: nodeLen, Displs: nodeOff})
		if me == rootLeader {
			ua.Send, ua.Recv, ua.InPlace = nil, all, true
		}
		if err := p.up(coll.Gather, coll.Gatherv, ua); err != nil {
			return err
		}
	}
	if me == rootLeader && !m.consecutive {
		for r := 0; r < size; r++ {
			datatype.CopyCached(res[r*block:(r+1)*block], all[rankOff[r]:rankOff[r]+block])
		}
	}
	return m.handToRoot(p, me, a, rootLeader, res)
}

// scatter: the root's node's leader gets the root's blocks (from the root
// when the root is another rank), packs them node by node, the leaders
// scatter the nodes' blocks, and each leader scatters within its node.
func (m *module) scatter(c coll.Comm, a *coll.Args) error {
	size, me := c.Size(), c.Rank()
	block := len(a.Recv)
	if a.InPlace {
		block = len(a.Send) / size
	}
	spread := m.scatterSpread > 0 && block >= m.scatterSpread && m.perNode > 1
	if block == 0 || !spread && m.gatherMax > 0 && block > m.gatherMax {
		return m.passBelow(c, a)
	}
	p, err := m.setup(c)
	if err != nil {
		return err
	}
	if spread && p.peers != nil {
		return m.spreadScatter(c, p, a, block)
	}
	f := m.enter()
	defer m.leave(f)
	k, k0 := m.node[me], m.node[a.Root]
	rootLeader := m.leader(k0)
	each := func(int) int { return block }
	nodeOff, nodeLen, rankOff, total := m.packed(f, each)

	var src, all, nodeBuf []byte
	if me == rootLeader {
		switch {
		case me == a.Root:
			src = a.Send
		default:
			src = a.Scratch.Get(total)
			defer a.Scratch.Put(src)
			if err := coll.RecvExactly(p.node, src, m.local[a.Root], ownTag(coll.Scatter)); err != nil {
				return err
			}
		}
		all = src
		if !m.consecutive {
			all = a.Scratch.Get(total)
			defer a.Scratch.Put(all)
			for r := 0; r < size; r++ {
				datatype.CopyCached(all[rankOff[r]:rankOff[r]+block], src[r*block:(r+1)*block])
			}
		}
		nodeBuf = all[nodeOff[k] : nodeOff[k]+nodeLen[k]]
	} else if me == a.Root {
		if err := p.node.Send(a.Send, m.local[rootLeader], ownTag(coll.Scatter)); err != nil {
			return err
		}
	}
	if p.leaders != nil {
		if me != rootLeader {
			nodeBuf = a.Scratch.Get(nodeLen[k])
			defer a.Scratch.Put(nodeBuf)
		}
		ua := f.args(coll.Args{Recv: nodeBuf, Root: k0, Counts: nodeLen, Displs: nodeOff})
		if me == rootLeader {
			ua.Send, ua.Recv, ua.InPlace = all, nil, true
		}
		if err := p.up(coll.Scatter, coll.Scatterv, ua); err != nil {
			return err
		}
	}
	na := f.args(coll.Args{Send: nodeBuf, Recv: a.Recv})
	if me == a.Root && a.InPlace {
		if me == rootLeader && m.consecutive {
			na.Recv, na.InPlace = nil, true // the root's block is where the node's block starts
		} else {
			spare := a.Scratch.Get(block)
			defer a.Scratch.Put(spare)
			na.Recv = spare
		}
	}
	return p.low(coll.Scatter, coll.Scatter, na)
}

// spreadScatter is scatter with every rank of the root's node in the
// network phase: the root sends each rank of its node the blocks of the
// ranks in that rank's place on the other nodes, then its own block; each
// passes them on over the network as they arrive, as the root does its
// own place's. The root's network share is one place's instead of every
// rank's off its node; the others' is a copy within the node more.
func (m *module) spreadScatter(c coll.Comm, p *parts, a *coll.Args, block int) error {
	me := c.Rank()
	k := m.node[me]
	k0, j0 := m.node[a.Root], m.local[a.Root]
	tag := ownTag(coll.Scatter)
	reqs := a.Requests()
	defer func() { a.PutRequests(reqs) }()
	post := func(sub coll.Sub, send bool, b []byte, peer int) error {
		return postMessage(&reqs, sub, send, b, peer, tag)
	}
	var err error
	switch {
	case me == a.Root:
		from := func(r int) []byte { return a.Send[r*block : (r+1)*block] }
		for k2, ranks := range m.nodes {
			if k2 != k0 && err == nil {
				err = post(p.peers, true, from(ranks[j0]), k2)
			}
		}
		for i := 0; i < m.perNode && err == nil; i++ {
			if i == j0 {
				continue
			}
			for k2, ranks := range m.nodes {
				if k2 != k0 && err == nil {
					err = post(p.node, true, from(ranks[i]), i)
				}
			}
			if err == nil {
				err = post(p.node, true, from(m.nodes[k0][i]), i)
			}
		}
		if err == nil && !a.InPlace {
			datatype.CopyCached(a.Recv, from(me))
		}
	case k == k0:
		// Every block is asked for at once; each for the network is passed
		// on as soon as it is here (a Wait frees its request: these are
		// kept apart from reqs, which are waited at the end).
		others := len(m.nodes) - 1
		relay := a.Scratch.Get(others * block)
		defer a.Scratch.Put(relay)
		arriving := make([]*pml.Request, 0, others)
		for h := 0; h < others && err == nil; h++ {
			err = postMessage(&arriving, p.node, false, relay[h*block:(h+1)*block], j0, tag)
		}
		if err == nil {
			err = post(p.node, false, a.Recv, j0)
		}
		h := 0
		for k2 := range m.nodes {
			if k2 == k0 || h >= len(arriving) {
				continue
			}
			werr := coll.WaitAll(p.node, arriving[h])
			if err == nil {
				if err = werr; err == nil {
					err = post(p.peers, true, relay[h*block:(h+1)*block], k2)
				}
			}
			h++
		}
	default:
		err = post(p.peers, false, a.Recv, k0)
	}
	if werr := coll.WaitAll(p.node, reqs...); err == nil {
		err = werr
	}
	return err
}

// allgather: each node gathers to its leader, the leaders allgather the
// nodes' blocks, and each leader bcasts the whole within its node.
func (m *module) allgather(c coll.Comm, a *coll.Args) error {
	size := c.Size()
	block := len(a.Send)
	if a.InPlace {
		block = len(a.Recv) / size
	}
	if block == 0 {
		return m.passBelow(c, a)
	}
	return m.gatherAll(c, a, func(int) int { return block }, func(r int) int { return r * block })
}

// allgatherv: allgather's phases with each rank's count; the node's bcast
// carries the leaders' packing, which every rank unpacks, unless the
// packing is the receive buffer's own layout.
func (m *module) allgatherv(c coll.Comm, a *coll.Args) error {
	total := 0
	for _, n := range a.Counts {
		total += n
	}
	if total == 0 {
		return m.passBelow(c, a)
	}
	return m.gatherAll(c, a, func(r int) int { return a.Counts[r] }, func(r int) int { return a.Displs[r] })
}

// packedAll is an allgather's packing (packed) in f, whether it is Recv's
// own layout (dense: the phases can then work in Recv itself), and this
// rank's block.
func (m *module) packedAll(f *frame, c coll.Comm, a *coll.Args, count, displ func(r int) int) (nodeOff, nodeLen, rankOff []int, total int, dense bool, mine []byte) {
	nodeOff, nodeLen, rankOff, total = m.packed(f, count)
	dense = m.consecutive
	for r := 0; r < c.Size() && dense; r++ {
		dense = displ(r) == rankOff[r]
	}
	mine = a.Send
	if a.InPlace {
		me := c.Rank()
		mine = a.Recv[displ(me) : displ(me)+count(me)]
	}
	return nodeOff, nodeLen, rankOff, total, dense, mine
}

// gatherAll is allgather and allgatherv, rank r's block being count(r)
// bytes at displ(r) of Recv.
func (m *module) gatherAll(c coll.Comm, a *coll.Args, count, displ func(r int) int) error {
	p, err := m.setup(c)
	if err != nil {
		return err
	}
	f := m.enter()
	defer m.leave(f)
	size, me := c.Size(), c.Rank()
	total := 0
	for r := 0; r < size; r++ {
		total += count(r)
	}
	if m.gatherSpreads(total, size) {
		return m.spreadGatherAll(c, p, f, a, count, displ)
	}
	k := m.node[me]
	nodeOff, nodeLen, rankOff, total, dense, mine := m.packedAll(f, c, a, count, displ)
	all := a.Recv[:min(total, len(a.Recv))]
	if !dense {
		all = a.Scratch.Get(total)
		defer a.Scratch.Put(all)
	}
	displs, lens := m.nodeLayout(f, k, count, rankOff)
	var nodeBuf []byte
	if p.leaders != nil {
		nodeBuf = all[nodeOff[k] : nodeOff[k]+nodeLen[k]]
	}
	gop := coll.Gather
	na := f.args(coll.Args{Send: mine, Recv: nodeBuf})
	if a.Op == coll.Allgatherv {
		gop = coll.Gatherv
		na.Counts, na.Displs = lens, displs
	}
	if p.leaders != nil && dense && a.InPlace {
		na.Send, na.InPlace = nil, true // the leader's block is where the node's block starts
	}
	if err := p.low(a.Op, gop, na); err != nil {
		return err
	}
	if p.leaders != nil {
		ua := f.args(coll.Args{Recv: all, InPlace: true, Counts: nodeLen, Displs: nodeOff})
		if err := p.up(a.Op, coll.Allgatherv, ua); err != nil {
			return err
		}
	}
	if err := p.low(a.Op, coll.Bcast, f.args(coll.Args{Recv: all})); err != nil {
		return err
	}
	if !dense {
		for r := 0; r < size; r++ {
			datatype.CopyCached(a.Recv[displ(r):displ(r)+count(r)], all[rankOff[r]:rankOff[r]+count(r)])
		}
	}
	return nil
}

// spreadGatherAll is allgather(v) with every rank in the network phase:
// each rank allgathers the blocks of the ranks in its place on every node
// with them, straight into Recv, while its node's ranks trade their own
// blocks; then they trade the blocks the network brought. Each block
// crosses the network once a node, as through one leader, but every rank
// carries its share at once, and no block is packed or copied twice.
func (m *module) spreadGatherAll(c coll.Comm, p *parts, f *frame, a *coll.Args, count, displ func(r int) int) error {
	f.lens, f.displs = ints(f.lens, len(m.nodes)), ints(f.displs, len(m.nodes))
	cut := m.cutGatherAll(c, a, count, displ, f.lens, f.displs)
	cut.ownIn()
	tag := ownTag(a.Op)
	reqs := a.Requests()
	defer func() { a.PutRequests(reqs) }()
	err := postMessages(&reqs, p.node, cut.trade(cut.k), tag)
	if err == nil {
		err = p.peers.Call(coll.Allgatherv, f.args(coll.Args{Recv: a.Recv, InPlace: true, Counts: cut.counts, Displs: cut.displs}))
	}
	for k2 := range m.nodes {
		if k2 != cut.k && err == nil {
			err = postMessages(&reqs, p.node, cut.trade(k2), tag)
		}
	}
	if werr := coll.WaitAll(p.node, reqs...); err == nil {
		err = werr
	}
	return err
}

// gatherAllCut is one rank's part of a spread allgather(v): every rank's
// block in Recv, and the blocks of its place's ranks on every node
// (counts, displs: the peers' allgatherv). It holds the blocks rather than
// count and displ, which every allgather passes: kept, they would escape
// for the calls that do not spread too (a small allgather allocates
// nothing).
type gatherAllCut struct {
	m              *module
	a              *coll.Args
	k, j           int
	blocks         [][]byte
	counts, displs []int
}

func (m *module) cutGatherAll(c coll.Comm, a *coll.Args, count, displ func(r int) int, counts, displs []int) *gatherAllCut {
	me := c.Rank()
	g := &gatherAllCut{m: m, a: a, k: m.node[me], j: m.local[me], blocks: make([][]byte, c.Size()), counts: counts, displs: displs}
	for r := range g.blocks {
		g.blocks[r] = a.Recv[displ(r) : displ(r)+count(r)]
	}
	for k2, ranks := range m.nodes {
		counts[k2], displs[k2] = count(ranks[g.j]), displ(ranks[g.j])
	}
	return g
}

// ownIn puts this rank's block where Recv holds it, unless it is there.
func (g *gatherAllCut) ownIn() {
	if !g.a.InPlace {
		datatype.CopyCached(g.blocks[g.m.nodes[g.k][g.j]], g.a.Send)
	}
}

// trade is node k2's blocks of this rank's place sent to the node's other
// ranks, and theirs received. Every rank of the node trades the nodes in
// one order, so a pair's messages match in it.
func (g *gatherAllCut) trade(k2 int) []message {
	ranks := g.m.nodes[k2]
	var msgs []message
	for i := range ranks {
		if i != g.j {
			msgs = append(msgs, message{buf: g.blocks[ranks[i]], peer: i})
		}
	}
	for i := range ranks {
		if i != g.j {
			msgs = append(msgs, message{send: true, buf: g.blocks[ranks[g.j]], peer: i})
		}
	}
	return msgs
}

// postMessages posts msgs in order (postMessage), up to the first error.
func postMessages(reqs *[]*pml.Request, sub coll.Sub, msgs []message, tag int) error {
	for _, x := range msgs {
		if err := postMessage(reqs, sub, x.send, x.buf, x.peer, tag); err != nil {
			return err
		}
	}
	return nil
}

// postMessage starts a send or a receive of b with peer on sub and adds it
// to reqs. An empty b posts nothing: both ends know its length, and the
// spread forms' pieces and blocks may be empty.
func postMessage(reqs *[]*pml.Request, sub coll.Sub, send bool, b []byte, peer, tag int) error {
	if len(b) == 0 {
		return nil
	}
	var r *pml.Request
	var err error
	if send {
		r, err = sub.Isend(b, peer, tag)
	} else {
		r, err = sub.Irecv(b, peer, tag)
	}
	if err == nil {
		*reqs = append(*reqs, r)
	}
	return err
}
