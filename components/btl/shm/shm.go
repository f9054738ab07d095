// Package shm is the shared-memory BTL: fragments between processes of one
// node through shared segments, and large buffers with one copy through
// process_vm_readv/writev (cross-memory attach, CMA).
//
// # Segments and their lifetime
//
// Segments are memfds by default (shmem_backing = auto): sealed to their
// size, opened by peers through /proc/<maker pid>/fd, their maker's
// descriptor closed once every peer that needs them has mapped them, so
// that no name exists that a crash, at any moment and under any launcher,
// could leave. With named files (shmem_backing = file, or where memfd
// cannot be used) every file of a job is named gompi-<jobid>-…, made with
// O_EXCL and mode 0600, locked by its maker, and removed as soon as every
// process that needs it has mapped it; what a crash during set-up leaves,
// mpirun removes at job end (shmem.RemoveJobFiles) and the node's next job
// sweeps at Init (shmem.Sweep), under any launcher. Below, "removes the
// file" is, for a memfd, "its maker closes its descriptor". The mechanism,
// control segments included, is package shmem's; the boxes and their
// rings are shm's own.
//
//   - A control segment per process (gompi-<jobid>-ctl-<rank>, one page for
//     up to 448 local ranks), made at Query, announced by a modex card, mapped
//     by each local peer in AddProcs, after Init's fence. It holds the owner's
//     pid, a doorbell, a "finalized" word, and one slot per local rank. Each
//     peer counts itself in an "attached" word; the peer that completes the
//     count removes the file.
//   - A box per ordered pair (gompi-<jobid>-box-<src>-<dst>), made lazily by
//     its sender on the first Send to that peer, so memory grows with the
//     pairs that talk rather than with the square of the local ranks. The
//     sender stores the ring size in its slot of the receiver's control
//     segment and rings the doorbell; the receiver, which loads its doorbell
//     once per Progress, maps the box and removes the file (both sides have
//     it mapped then). A box thus exists as a file only until its receiver's
//     next Progress; a crash in that window leaves it to mpirun, or to the
//     survivor's Finalize, where each side removes any box the other never
//     mapped.
//
// # One ring per pair: fast box and FIFO
//
// A box is one single-producer single-consumer ring of variable-length
// records (ring.go), padded to 8 bytes, never straddling the end of the ring,
// each published by a one-word header whose stamp names its position. It
// plays both of vader's parts. Like a fast box, a small fragment is one copy
// in and one copy out, found by polling the next header of each peer's ring
// (one cache line per message: header, PML header and a small payload share
// it; an 8-byte message is a 32-byte record, two to a line), with no
// lock shared between processes and no descriptor to allocate. Like the
// FIFO, it carries every fragment up to max_send_size in order with the small
// ones, and its capacity is the flow control: when the ring is full Send
// returns btl.ErrWouldBlock and nothing is queued, so a fast sender never
// grows memory. The receive callback gets a slice of the ring itself; the
// tail (on a line of its own, loaded by the sender only when it finds the
// ring full) advances after the callbacks of a poll return (and every eighth
// of the ring within one). Unlike vader, there is no
// per-receiver FIFO shared by all senders (an atomic swap per fragment) nor a
// pool of fragments to return: the price is memory, btl_shm_ring_size
// (128 KiB by default) plus a 512-byte header per ordered pair that has
// talked, and one 4 KiB control page per process. Two processes that talk
// both ways use 2 × 128.5 KiB; 64 processes that all talk to each other, 4032
// boxes, about 520 MiB of /dev/shm (a smaller btl_shm_ring_size trades
// bandwidth for it).
//
// # Single copy
//
// With btl_shm_single_copy_mechanism=cma (the default), AddProcs reads a
// random word of each peer's control segment at the address the peer
// published, with process_vm_readv: success shows that the kernel lets us
// (same user, no Yama or seccomp in the way) and that the pid is the right
// process. A refusal is logged at verbosity 10 and that peer's endpoint
// offers neither FlagGet nor FlagPut, so the PML sends fragments; a refusal
// later, at Get, turns the flags off from then on. Goroutine ranks read
// their own pid, which works too.
//
// # Progress, liveness and peer loss
//
// Progress polls (it never sleeps: a thread wake-up costs microseconds, a
// message a fraction of one): a try-lock, one load of the doorbell, one load
// of the next stamp of each attached box. Every btl_shm_liveness_polls calls
// it polls the peers' pidfds in one poll(2), and looks at their "finalized"
// words; a Send refused that many times in a row does the same for its
// peer. (A pidfd sees a killed peer even before its parent reaps it, and
// never mistakes a reused pid for it; without pidfd_open, kill(pid, 0).) A dead peer's endpoint fails from then on with btl.ErrPeerLost and
// the error callback is told, from Progress (Send's caller may hold locks
// the callback takes). A peer that finalized fails sends without the
// callback: it left in order.
//
// # Sleeping receivers
//
// The control segment's sleep word is this process's rte.Watcher: a waiting
// goroutine that falls asleep sets it (Arm) before its last look at the
// rings, and every Send loads the receiver's word after publishing the
// fragment, and rings the receiver's bell when it is set. One load of a
// line that changes only when the receiver falls asleep or wakes.
//
// # Concurrency
//
// Send and Sendi take the endpoint's lock (one producer per box); Progress
// takes a module lock with TryLock and returns 0 when another goroutine
// holds it. Callbacks run inside Progress and may call Send, to any peer.
package shm

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/components/common/shmem"
	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
	"github.com/gompi/gompi/rte"
)

// Component is the shm BTL component.
type Component struct {
	common        btl.CommonParams
	ringSize      *params.Param
	singleCopy    *params.Param
	livenessPolls *params.Param
	pipelineLimit *params.Param
}

// maxPipelineLimit bounds btl_shm_pipeline_limit: an unexpected pipelined
// message is held whole by its receiver, as an eager one.
const maxPipelineLimit = 64 << 20

// Single-copy mechanisms, the values of btl_shm_single_copy_mechanism.
const (
	singleCopyNone = 0
	singleCopyCMA  = 1
)

// Info describes the component.
func (c *Component) Info() mca.Info {
	return mca.Info{Framework: "btl", Name: "shm", Version: mca.GompiVersion, API: btl.Framework.API}
}

// Register declares the component's parameters.
func (c *Component) Register(r *mca.Registrar) {
	// Eager up to a page of payload: 4096 bytes plus room for the PML's
	// header (Open MPI's vader stops at 4096 with the header, so a 4 KiB
	// message takes a rendezvous). A 4 KiB message copied through the ring
	// twice beats the rendezvous, whose single copy costs a
	// process_vm_readv and a FIN, in both placements (one-way 0.70 against
	// 3.3 µs near, 2.7 against 3.7 far). Larger ones win near (16 KiB: 2.4
	// against 4.1 µs) but lose far (9.2 against 5.2), where every line of
	// the ring crosses between the cores at 250 ns.
	c.common = btl.RegisterCommon(r, "shm", btl.Defaults{
		Exclusivity: 65536, EagerLimit: 4<<10 + 64, RndvEagerLimit: 4 << 10, MaxSendSize: 32 << 10, Latency: 1, Bandwidth: 40000,
	})
	c.ringSize = r.Add(params.Def{Name: "btl_shm_ring_size", Type: params.Size, Level: 4, Default: "128k",
		Help: "Bytes of the ring from one process to another on the node (the fast box and fragment FIFO of one pair, " +
			"made on first send): a power of two from 4k to 1g, at least twice btl_shm_max_send_size plus 32. " +
			"It is also how far a sender may run ahead of its receiver"})
	c.singleCopy = r.Add(params.Def{Name: "btl_shm_single_copy_mechanism", Type: params.Enum, Level: 3, Default: "cma",
		Values: []params.EnumValue{{Value: singleCopyNone, Name: "none"}, {Value: singleCopyCMA, Name: "cma"}},
		Help: "How large buffers move between local processes: cma (process_vm_readv/writev, one copy; probed per peer, " +
			"falling back to fragments where the kernel refuses) or none (always fragments through the rings)"})
	// 16k: measured one-way (bench/compare.sh's sizes, 2026-11-26, Open
	// MPI's vader side by side), pipelined against RGET: 8 KiB 2.5 against
	// 4.7 µs near (vader 4.6), 2.6 against 5.4 far; 16 KiB 4.5 against 5.1
	// near, 4.8 against 5.3 far; 32 KiB 8.0 against 6.2 near, 8.3 against
	// 6.3 far. Above 16 KiB the ring's lines, which cross between the cores
	// for every message, cost more than the system call of the single
	// copy, whose source lines a sender that does not rewrite its buffer
	// keeps in both caches.
	c.pipelineLimit = r.Add(params.Def{Name: "btl_shm_pipeline_limit", Type: params.Size, Level: 4, Default: "16k",
		Help: "Messages above the eager limit and up to this many bytes go eagerly as fragments of btl_shm_max_send_size " +
			"back to back through the ring, the receiver copying one out while the sender copies the next in, " +
			"instead of a rendezvous with single copy (whose system call costs more than copying them twice up to here, near); " +
			"with pml_ob1_rdma_choice=measured only while the receiver measures them the faster (far apart, single copy won at 16 KiB). " +
			"0 or at most the eager limit: never. Up to 64m (an unexpected message is held whole)"})
	c.livenessPolls = r.Add(params.Def{Name: "btl_shm_liveness_polls", Type: params.Uint, Level: 7, Default: "8192",
		Help: "Progress calls, and refused sends to one peer in a row, between checks that local peers are alive " +
			"(one poll of their pidfds): 1 to 1073741824"})
}

// config reads and checks the component's own parameters and their relation
// to max_send_size.
func (c *Component) config(b *mca.Base, maxSend int) (config, error) {
	cfg := config{
		ringSize: b.Get(c.ringSize).Uint(),
		cma:      b.Get(c.singleCopy).Int() == singleCopyCMA,
	}
	if !validRingSize(cfg.ringSize) {
		return cfg, mpierr.Errorf(mpierr.ErrUnsupportedParam, "btl_shm_ring_size = %d: accepted: a power of two from %d to %d (4k to 1g)",
			cfg.ringSize, minRingSize, maxRingSize)
	}
	if maxSend > maxLen {
		return cfg, mpierr.Errorf(mpierr.ErrUnsupportedParam,
			"btl_shm_max_send_size = %d: accepted: up to %d (the longest fragment a ring record describes)", maxSend, maxLen)
	}
	if maxFragment(cfg.ringSize) < maxSend {
		return cfg, mpierr.Errorf(mpierr.ErrUnsupportedParam,
			"btl_shm_ring_size = %d is too small for btl_shm_max_send_size = %d: accepted: a ring of at least twice max_send_size plus 32 (%d, rounded up to a power of two), or max_send_size up to %d",
			cfg.ringSize, maxSend, 2*maxSend+32, maxFragment(cfg.ringSize))
	}
	polls := b.Get(c.livenessPolls).Uint()
	if polls < 1 || polls > 1<<30 {
		return cfg, mpierr.Errorf(mpierr.ErrUnsupportedParam, "btl_shm_liveness_polls = %d: accepted: 1 to %d", polls, 1<<30)
	}
	cfg.livenessPolls = int(polls)
	if lim := b.Get(c.pipelineLimit).Uint(); lim > maxPipelineLimit {
		return cfg, mpierr.Errorf(mpierr.ErrUnsupportedParam, "btl_shm_pipeline_limit = %d: accepted: 0 to %d (64m)", lim, maxPipelineLimit)
	}
	return cfg, nil
}

// Query makes the module: it checks the parameters, makes this process's
// control segment and publishes the card that tells local peers to map it.
// It declines when no other process of the job shares the node.
func (c *Component) Query(b *mca.Base, rt *rte.Runtime) (btl.Module, error) {
	job := rt.Job()
	log := b.Logger("btl").Named("shm")
	// Bad values are errors even where the component would decline: the
	// user should hear of them on a laptop before the cluster.
	var flags btl.Flags
	if b.Get(c.singleCopy).Int() == singleCopyCMA {
		flags = btl.FlagGet | btl.FlagPut
	}
	attr, err := c.common.Attributes(b, "shm", flags)
	if err != nil {
		return nil, err
	}
	cfg, err := c.config(b, attr.MaxSendSize)
	if err != nil {
		return nil, err
	}
	// ob1 sends eager what fits the eager limit: a pipeline limit at or
	// below it changes nothing.
	attr.PipelineLimit = int(b.Get(c.pipelineLimit).Uint())
	if job.LocalSize < 2 {
		return nil, mca.Decline("no other process of the job on node %s", job.Node)
	}
	if err := shmem.Usable(job.ID); err != nil {
		return nil, err
	}
	if cfg.cma {
		allowPtrace(log)
	}
	m := &module{
		attr: attr, cfg: cfg, log: log, modex: rt.Modex(), wake: rt.Bell(),
		job: job.ID, rank: job.Rank, pid: os.Getpid(), node: job.NodeIndex, nodeOf: job.NodeOf,
		localRanks: job.LocalRanks(job.NodeIndex),
	}
	m.owner = owner
	m.owner.Maps = shmem.MapsFor(rt)
	m.owner.Held = &shmem.Held{}
	if m.owner.Backing, err = shmem.ChooseBacking(b, log); err != nil {
		return nil, err
	}
	if m.localRanks[0] == job.Rank {
		// The node's first rank removes what crashed jobs left (named
		// files only have a name to leave).
		if n := shmem.Sweep(log); n > 0 {
			log.Log(mca.VerboseComponent, "removed files of jobs that are gone", "dir", shmem.Dir, "files", n)
		}
	}
	if err := m.owner.CheckRoom(len(m.localRanks), boxHeader+cfg.ringSize, fmt.Sprintf("a %d-byte ring", cfg.ringSize)); err != nil {
		return nil, err
	}
	for i, r := range m.localRanks {
		if r == job.Rank {
			m.localIdx = i
		}
	}
	m.eps = make([]*endpoint, len(m.localRanks))
	m.in = make([]*inbox, len(m.localRanks))
	ctl, err := m.owner.CreateCtl(job.ID, shmem.CtlHeader{Rank: job.Rank, Pid: m.pid, LocalSize: len(m.localRanks)})
	if err != nil {
		return nil, err
	}
	m.ctl = ctl
	// While a goroutine of ours sleeps, peers that write to us ring.
	rt.Bell().Watch(ctl)
	// Peers probe single copy by reading the nonce at this address.
	putProbe(ctl.Mem, uint64(uintptr(unsafe.Pointer(&ctl.Mem[ctlOffNonce]))), rand.Uint64()|1)
	if err := owner.PublishCard(rt.Modex(), m.pid, ctl); err != nil {
		return nil, err
	}
	mech := "none"
	if cfg.cma {
		mech = "cma"
	}
	log.Log(mca.VerboseComponent, "shared memory ready", "local_ranks", len(m.localRanks), "ring_bytes", cfg.ringSize,
		"eager_limit", attr.EagerLimit, "max_send_size", attr.MaxSendSize, "single_copy", mech, "control_segment", ctl.Name)
	if !cfg.cma {
		return withoutSingleCopy{m}, nil
	}
	return m, nil
}

// allowPtrace lets local peers read this process with process_vm_readv under
// Yama's ptrace_scope 1, where only a declared tracer may (Open MPI's vader
// does the same). Scopes 2 and 3 cannot be relaxed: the probe then fails and
// transfers go as fragments.
func allowPtrace(log *mca.Logger) {
	b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	if err != nil || strings.TrimSpace(string(b)) != "1" {
		return
	}
	const ptracerAny = ^uintptr(0) // PR_SET_PTRACER_ANY, which x/sys does not define
	if err := unix.Prctl(unix.PR_SET_PTRACER, ptracerAny, 0, 0, 0); err != nil {
		log.Log(mca.VerboseComponent, "Yama ptrace_scope is 1 and PR_SET_PTRACER failed: single copy will be refused", "error", err.Error())
		return
	}
	log.Log(mca.VerboseComponent, "Yama ptrace_scope is 1: allowed local peers to read this process (PR_SET_PTRACER_ANY)")
}
