package mpi

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"

	_ "github.com/gompi/gompi/components/builtin"
	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/frameworks/llp"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/internal/stamp"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
	"github.com/gompi/gompi/rte"
)

// Options configure InitWith. The zero value is what Init uses: the process
// environment, no extra settings, standard error for logs.
type Options struct {
	// Env is the environment snapshot parameters and the launcher's
	// variables are read from; nil means os.Environ().
	Env []string
	// MCA are parameter settings at command-line precedence.
	MCA []params.Setting
	// Catalog is the component catalogue; nil means mca.Default().
	Catalog *mca.Catalog
	// Output receives logs and reports; nil means os.Stderr.
	Output io.Writer
	// PMI is an established connection to a PMI server, for harnesses that
	// run ranks as goroutines (mpitest); Env then carries PMI_RANK and
	// PMI_SIZE.
	PMI io.ReadWriteCloser
	// Neighborhood holds the goroutine ranks of this process, for harnesses
	// that run several ranks in one process (mpitest): their waits then
	// wake each other directly.
	Neighborhood *rte.Neighborhood
	// Exit ends the rank after Abort; it is called on the aborting
	// goroutine. nil means exiting the process (after killing its process
	// group, so that its children go too), and then the process also exits
	// when its launcher goes away. A goroutine harness stops the goroutine
	// instead; its ranks see a lost launcher as errors from their calls.
	Exit func(code int)
}

// Instance is one initialized MPI process: the layers Init sets up, from
// the launcher's runtime down to the communicators it makes.
type Instance struct {
	rt   *rte.Runtime
	base *mca.Base
	exit func(int)
	// groups is the group module and the world and self groups (group.go).
	groups groupState
	// bml is the byte transfer layer: the selected BTLs, per peer.
	bml *btl.BML
	// llps are the selected low-latency paths (none is fine), pml the
	// point-to-point layer over the BML and the LLPs.
	llps []llp.Module
	pml  pml.Module
	// world and self are MPI_COMM_WORLD (context id 0) and MPI_COMM_SELF
	// (1); cids are the context ids in use (comm_create.go).
	world, self *Comm
	cids        cidSet
	// collTables are the collective tables of the communicators not freed
	// (coll.go), which Finalize finalizes.
	collTables collTables
	// nbc is the nonblocking collectives in flight and the goroutine that
	// advances them (nbc.go).
	nbc nbcState
	// ft is what the instance knows of failed processes (ft.go).
	ft ftState
	// agreeHook, when set (tests: export_test.go), is called by a
	// coordinator after each decision it sends.
	agreeHook func(k uint32, to int)
	// deliveryHook, when set (tests), is called while a death is half
	// delivered: collectives failed, AnySource receives not yet.
	deliveryHook func(w int)
	// down is set by Finalize and Abort: calls fail with ErrComm after it.
	down atomic.Bool
	// groupTransport, when set (tests: export_test.go), wraps the parent
	// that CreateGroup's lwgrp algorithm talks through, to count rounds.
	groupTransport func(*Comm) pml.Transport
	// reducers caches ops bound to element types (coll.go), and
	// lastReducer the last one looked up: a loop of one reduction finds it
	// with two compares instead of a map lookup (hashing the key cost an
	// 8-byte Allreduce a tenth of its time).
	reducers    sync.Map
	lastReducer atomic.Pointer[reducerEntry]

	mu        sync.Mutex
	finalized bool
}

// Init starts an instance from the process environment.
func Init() (*Instance, error) { return InitWith(Options{}) }

// InitWith starts an instance with explicit options.
func InitWith(o Options) (*Instance, error) {
	stamp.Mark("init: entered")
	env := o.Env
	if env == nil {
		env = os.Environ()
	}
	out := o.Output
	if out == nil {
		out = os.Stderr
	}
	inst := &Instance{exit: o.Exit}
	var onLost func(error)
	if inst.exit == nil {
		inst.exit = exitProcess
		onLost = launcherLost
	}
	rt, err := rte.Start(rte.Options{Env: env, PMI: o.PMI, OnLost: onLost, Neighborhood: o.Neighborhood})
	if err != nil {
		return nil, fmt.Errorf("mpi: Init: %w", err)
	}
	inst.rt = rt
	stamp.Mark("init: rte started")
	job := rt.Job()
	base, err := mca.NewBase(mca.Options{
		Catalog: o.Catalog, Output: out, Rank: job.Rank, Reporter: job.Rank == 0,
		Sources: params.Sources{Env: env, CommandLine: o.MCA},
	})
	if err != nil {
		// Tell the launcher this rank cannot go on, so the job ends at once
		// rather than waiting for this rank at the next barrier.
		err = fmt.Errorf("mpi: Init (rank %d): %w", job.Rank, err)
		rt.Abort(1, err.Error())
		return nil, err
	}
	inst.base = base
	stamp.Mark("init: parameters and components")
	rt.SetLogger(base.Logger("rte"))
	if err := inst.setup(); err != nil {
		err = fmt.Errorf("mpi: Init (rank %d): %w", job.Rank, err)
		rt.Abort(1, err.Error())
		base.Close()
		return nil, err
	}
	stamp.Mark("init: done")
	return inst, nil
}

// setup brings the layers up, bottom to top, as Open MPI's ompi_mpi_init
// does: groups, the BTLs and LLPs (which publish their business cards),
// the modex fence, the BML over the peers' cards, the PML, the world and
// self communicators (each with its collective table), and the launcher's
// barrier. A failure releases what was set up: goroutine ranks of a failed
// Init must not leave listeners or mappings behind.
func (i *Instance) setup() error {
	// Groups first: they are local, and a bad group setting should stop
	// Init before any transport starts.
	if err := i.groups.setup(i.base, i.Rank(), i.Size()); err != nil {
		return err
	}
	stamp.Mark("init: groups")
	transports, err := btl.Select(i.base, i.rt)
	if err != nil {
		return err
	}
	stamp.Mark("init: btl selected")
	llps, err := llp.Select(i.base, i.rt)
	if err != nil {
		btl.FinalizeSelected(transports)
		return err
	}
	for _, m := range llps {
		i.llps = append(i.llps, m.Module)
	}
	// The first fence publishes the components' business cards; it is also
	// Init's barrier.
	stamp.Mark("init: llp selected; modex start")
	if err := i.rt.Modex().Fence(context.Background()); err != nil {
		btl.FinalizeSelected(transports)
		return i.undoSetup(err)
	}
	stamp.Mark("init: modex end")
	if i.bml, err = btl.NewBML(i.base, i.rt, transports); err != nil {
		return i.undoSetup(err) // NewBML finalized the transports
	}
	stamp.Mark("init: bml")
	setupErr := i.setupComms()
	stamp.Mark("init: pml and communicators; barrier start")
	// No rank leaves Init before every rank has set up its transports (as
	// Open MPI's MPI_Init ends with a barrier): a rank that returns and exits
	// at once must not pull the ground from under a peer still adding it.
	// That holds for a rank whose setup failed too (no collective fills an
	// operation, say): undoing removes segments its peers may still be
	// mapping, and they would report that instead of the real cause.
	if err := i.launcherBarrier(); err != nil && setupErr == nil {
		setupErr = err
	}
	if setupErr != nil {
		return i.undoSetup(setupErr)
	}
	return nil
}

// setupComms selects the PML, once the BML exists, and makes the world
// (context id 0) and self (context id 1) communicators.
func (i *Instance) setupComms() error {
	m, _, err := pml.Select(i.base, &pml.Env{Runtime: i.rt, BML: i.bml, LLP: i.llps})
	if err != nil {
		return err
	}
	i.pml = m
	i.setupNBC()
	i.setupFT()
	i.cids.set(0, true)
	i.cids.set(1, true)
	if i.world, err = i.newComm(0, i.groups.world, "MPI_COMM_WORLD"); err != nil {
		return err
	}
	i.self, err = i.newComm(1, i.groups.self, "MPI_COMM_SELF")
	return err
}

// undoSetup releases the layers a failed setup brought up and returns err.
func (i *Instance) undoSetup(err error) error {
	i.finalizeLayers()
	return err
}

// launcherBarrier is the launcher's barrier, as Init and Finalize end and
// begin: it waits through the engine's policy (sleeping until the launcher
// answers, where waits sleep), progressing meanwhile so that what peers
// still need from this process (control messages, queued fragments) goes
// out.
func (i *Instance) launcherBarrier() error {
	if i.pml == nil {
		return i.rt.Barrier()
	}
	eng := i.pml.Engine()
	var err error
	var done atomic.Bool
	go func() {
		err = i.rt.Barrier()
		done.Store(true)
		eng.Wake()
	}()
	if werr := eng.UntilEvent(nil, done.Load); werr != nil {
		return werr
	}
	return err
}

// finalizeLayers releases, top down, the PML, the LLPs and the BML (with
// its BTLs), whichever are up, and returns the first error.
func (i *Instance) finalizeLayers() error {
	i.down.Store(true)
	var err error
	if i.pml != nil {
		err = i.pml.Finalize()
	}
	for _, l := range i.llps {
		if lerr := l.Finalize(); lerr != nil && err == nil {
			err = fmt.Errorf("llp %s: %w", l.Name(), lerr)
		}
	}
	if i.bml != nil {
		if berr := i.bml.Finalize(); berr != nil && err == nil {
			err = berr
		}
	}
	return err
}

// launcherLost runs when the connection to the launcher of a rank process
// ends before Finalize: mpirun died or ended the job. The rank ends too.
func launcherLost(err error) {
	exitProcess(int(mpierr.ErrProcAborted))
}

// exitProcess ends the process and everything it started: a rank is the
// leader of its own process group (mpirun makes it so), so killing the group
// takes its children too.
func exitProcess(code int) {
	if pgid, err := syscall.Getpgid(0); err == nil && pgid == os.Getpid() {
		// The signal reaches this process too: ignore it, so that the exit
		// code is ours.
		signal.Ignore(syscall.SIGTERM)
		syscall.Kill(-pgid, syscall.SIGTERM)
	}
	os.Exit(code)
}

// Rank returns this process's rank in the world.
func (i *Instance) Rank() int { return i.rt.Job().Rank }

// Size returns the number of processes in the world.
func (i *Instance) Size() int { return i.rt.Job().Size }

// Node returns the name of the node (host) this process runs on.
func (i *Instance) Node() string { return i.rt.Job().Node }

// LocalRank returns this process's rank among the processes on its node.
func (i *Instance) LocalRank() int { return i.rt.Job().LocalRank }

// LocalSize returns the number of processes on this node.
func (i *Instance) LocalSize() int { return i.rt.Job().LocalSize }

// JobID returns the job's id.
func (i *Instance) JobID() string { return i.rt.Job().ID }

// Params returns the instance's MCA parameter values.
func (i *Instance) Params() *params.Values { return i.base.Params() }

// Base returns the instance's MCA base, for components and tools.
func (i *Instance) Base() *mca.Base { return i.base }

// Runtime returns the instance's run-time environment (identity, modex).
func (i *Instance) Runtime() *rte.Runtime { return i.rt }

// BML returns the instance's byte transfer layer, for tools and the tests of
// the transports.
func (i *Instance) BML() *btl.BML { return i.bml }

// Finalize ends the instance. Calling it twice is an error.
func (i *Instance) Finalize() error {
	i.mu.Lock()
	if i.finalized {
		i.mu.Unlock()
		return mpierr.Errorf(mpierr.ErrOther, "mpi: Finalize called twice")
	}
	i.finalized = true
	i.mu.Unlock()
	stamp.Mark("finalize: entered; barrier start")
	// Wait for everyone, so that no rank leaves while a peer may still need
	// it; then finalize the communicators' collectives and the layers, top
	// down, and say goodbye to the launcher.
	err := i.launcherBarrier()
	stamp.Mark("finalize: barrier end")
	i.finalizeNBC()
	if cerr := i.collTables.finalizeAll(); err == nil {
		err = cerr
	}
	if lerr := i.finalizeLayers(); err == nil {
		err = lerr
	}
	if cerr := i.base.Close(); err == nil {
		err = cerr
	}
	stamp.Mark("finalize: layers closed")
	if ferr := i.rt.Finalize(); err == nil {
		err = ferr
	}
	stamp.Mark("finalize: done")
	if err != nil {
		return fmt.Errorf("mpi: Finalize (rank %d): %w", i.Rank(), err)
	}
	return nil
}

// Finalized reports whether Finalize has been called.
func (i *Instance) Finalized() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.finalized
}

// Abort ends the whole job: the launcher kills every rank and exits with
// code. It does not return to its caller (a goroutine rank stops its
// goroutine).
func (i *Instance) Abort(code int) {
	i.mu.Lock()
	i.finalized = true
	i.mu.Unlock()
	i.down.Store(true)
	i.rt.Abort(code, fmt.Sprintf("rank %d called Abort(%d)", i.Rank(), code))
	i.exit(code)
}
