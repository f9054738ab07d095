package btl

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/rte"
)

// Route is one module's way to one peer.
type Route struct {
	Module Module
	EP     Endpoint
	Attr   Attributes
}

// Peer is how an instance reaches one rank: the BTL multiplexing layer
// (Open MPI's BML).
type Peer struct {
	Rank int
	// Send are the modules that carry the peer's fragments: those of the
	// highest exclusivity that reach it, lowest latency first. Send[0] is the
	// eager path.
	Send []Route
	// RDMA are the Send routes that can Get or Put towards the peer.
	RDMA []Route
}

// BML keeps, per peer, the BTLs that reach it. It is built once per instance
// at Init and read-only afterwards, so lookups take no lock.
type BML struct {
	modules []Module
	peers   []Peer
	rt      *rte.Runtime
}

// NewBML asks every selected module which ranks it reaches and keeps, per
// rank, the routes of the highest exclusivity. A rank that no module reaches
// is an error naming both ranks and the BTLs tried. A module whose RDMA
// flags and methods disagree (see Flags) is an ErrIntern error, found
// before its AddProcs for the module's flags and after it for its
// endpoints'. On an error every selected module has been finalized.
func NewBML(b *mca.Base, rt *rte.Runtime, selected []mca.Selected[Module]) (bml *BML, err error) {
	defer func() {
		if err != nil {
			FinalizeSelected(selected)
		}
	}()
	job := rt.Job()
	log := b.Logger("btl")
	ranks := make([]int, job.Size)
	for r := range ranks {
		ranks[r] = r
	}
	type added struct {
		m   Module
		a   Attributes
		eps []Endpoint
	}
	var mods []added
	for _, s := range selected {
		a := s.Module.Attributes()
		if err := checkRDMA(s.Module, a); err != nil {
			return nil, mpierr.Errorf(mpierr.ErrIntern, "btl %s: %v", s.Entry.Info.Name, err)
		}
		eps, err := s.Module.AddProcs(ranks)
		if err != nil {
			return nil, fmt.Errorf("btl %s: adding the job's processes: %w", s.Entry.Info.Name, err)
		}
		if len(eps) != len(ranks) {
			return nil, mpierr.Errorf(mpierr.ErrIntern, "btl %s: AddProcs returned %d endpoints for %d ranks", s.Entry.Info.Name, len(eps), len(ranks))
		}
		for r, ep := range eps {
			if ep != nil && ep.Flags()&^a.Flags != 0 {
				return nil, mpierr.Errorf(mpierr.ErrIntern, "btl %s: the endpoint of rank %d offers %v, beyond the module's %v",
					s.Entry.Info.Name, r, ep.Flags(), a.Flags)
			}
		}
		mods = append(mods, added{s.Module, a, eps})
	}
	sort.SliceStable(mods, func(i, j int) bool {
		if mods[i].a.Exclusivity != mods[j].a.Exclusivity {
			return mods[i].a.Exclusivity > mods[j].a.Exclusivity
		}
		if mods[i].a.Latency != mods[j].a.Latency {
			return mods[i].a.Latency < mods[j].a.Latency
		}
		return mods[i].a.Name < mods[j].a.Name
	})
	bml = &BML{peers: make([]Peer, job.Size), rt: rt}
	for _, m := range mods {
		bml.modules = append(bml.modules, m.m)
	}
	var unreachable []int
	for r := range ranks {
		p := &bml.peers[r]
		p.Rank = r
		for _, m := range mods {
			ep := m.eps[r]
			if ep == nil {
				continue
			}
			if len(p.Send) > 0 && m.a.Exclusivity < p.Send[0].Attr.Exclusivity {
				if log.V(mca.VerboseDebug) {
					log.Log(mca.VerboseDebug, "not using btl: another reaches the peer with higher exclusivity",
						"btl", m.a.Name, "peer", r, "using", p.Send[0].Attr.Name)
				}
				continue
			}
			route := Route{Module: m.m, EP: ep, Attr: m.a}
			p.Send = append(p.Send, route)
			if ep.Flags()&(FlagGet|FlagPut) != 0 {
				p.RDMA = append(p.RDMA, route)
			}
		}
		if len(p.Send) == 0 {
			unreachable = append(unreachable, r)
			continue
		}
		if log.V(mca.VerboseInfo) {
			log.Log(mca.VerboseInfo, "using btl for peer", "btl", p.Send[0].Attr.Name, "peer", r, "node", job.NodeOf[r])
		}
	}
	if len(unreachable) > 0 {
		var tried []string
		for _, m := range mods {
			tried = append(tried, m.a.Name)
		}
		shown := unreachable
		more := ""
		if len(shown) > 8 {
			shown, more = shown[:8], fmt.Sprintf(" and %d more", len(unreachable)-8)
		}
		var names []string
		for _, r := range shown {
			names = append(names, fmt.Sprint(r))
		}
		return nil, fmt.Errorf("rank %d cannot reach rank %s%s: BTLs tried: %s (set btl_base_verbose to 100 for details): %w",
			job.Rank, strings.Join(names, ", "), more, strings.Join(tried, ", "), ErrUnreachable)
	}
	return bml, nil
}

// checkRDMA reports a module whose two RDMA signals disagree: FlagGet or
// FlagPut in its attributes without the RDMA methods (the PML would find
// no Get to call, and silently send fragments), or the methods without
// either flag (the PML would never call them: the author forgot the flags).
func checkRDMA(m Module, a Attributes) error {
	_, methods := m.(RDMA)
	flags := a.Flags&(FlagGet|FlagPut) != 0
	switch {
	case flags && !methods:
		return fmt.Errorf("its attributes offer %v, but %T does not implement btl.RDMA (Expose, Get, Put)", a.Flags, m)
	case methods && !flags:
		return fmt.Errorf("%T implements btl.RDMA, but its attributes offer neither FlagGet nor FlagPut", m)
	}
	return nil
}

// Peer returns how to reach rank.
func (m *BML) Peer(rank int) *Peer { return &m.peers[rank] }

// Size is the number of ranks.
func (m *BML) Size() int { return len(m.peers) }

// Modules returns the modules in use, highest exclusivity first.
func (m *BML) Modules() []Module { return m.modules }

// RegisterRecv installs fn for tag on every module.
func (m *BML) RegisterRecv(tag Tag, fn RecvFunc) {
	for _, mod := range m.modules {
		mod.RegisterRecv(tag, fn)
	}
}

// RegisterRecvRun installs fn for runs of tag on every module that
// delivers runs (RunReceiver).
func (m *BML) RegisterRecvRun(tag Tag, fn RunRecvFunc) {
	for _, mod := range m.modules {
		if r, ok := mod.(RunReceiver); ok {
			r.RegisterRecvRun(tag, fn)
		}
	}
}

// RegisterSteer installs s on every module that takes steers (Steerer).
func (m *BML) RegisterSteer(tag Tag, s Steer) {
	for _, mod := range m.modules {
		if st, ok := mod.(Steerer); ok {
			st.RegisterSteer(tag, s)
		}
	}
}

// RegisterError installs fn on every module. The run-time environment hears
// of every lost peer first (rte.Runtime.PeerLost), so that the launcher can
// tell a failure of this process that follows from its cause.
func (m *BML) RegisterError(fn ErrorFunc) {
	wrapped := func(rank int, err error) {
		if m.rt != nil {
			m.rt.PeerLost(rank)
		}
		fn(rank, err)
	}
	for _, mod := range m.modules {
		mod.RegisterError(wrapped)
	}
}

// SendCounts returns, by BTL name, the send counts of every module in use
// that keeps them (SendCounter); modules that do not are absent. After
// Finalize it is empty.
func (m *BML) SendCounts() map[string]SendCounts {
	out := make(map[string]SendCounts)
	for _, mod := range m.modules {
		if c, ok := mod.(SendCounter); ok {
			name := mod.Attributes().Name
			s := c.SendCounts()
			sum := out[name]
			sum.Frames += s.Frames
			sum.Bytes += s.Bytes
			out[name] = sum
		}
	}
	return out
}

// Progress progresses every module and returns the fragments delivered.
func (m *BML) Progress() int {
	n := 0
	for _, mod := range m.modules {
		n += mod.Progress()
	}
	return n
}

// Finalize finalizes every module.
func (m *BML) Finalize() error {
	var errs []error
	for _, mod := range m.modules {
		if err := mod.Finalize(); err != nil {
			errs = append(errs, fmt.Errorf("btl %s: %w", mod.Attributes().Name, err))
		}
	}
	m.modules = nil
	return errors.Join(errs...)
}

// FinalizeSelected finalizes modules that never made it into a BML.
func FinalizeSelected(selected []mca.Selected[Module]) {
	for _, s := range selected {
		s.Module.Finalize()
	}
}
