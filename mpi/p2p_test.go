package mpi_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gompi/gompi/internal/p2pcheck"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// suiteCase is one run of the matching suite with goroutine ranks.
type suiteCase struct {
	ranks int
	btl   string
	mca   []string // more name, value pairs
	short bool     // also under -short
}

func (sc suiteCase) name() string {
	n := fmt.Sprintf("%d/%s", sc.ranks, strings.ReplaceAll(sc.btl, ",", "+"))
	for i := 0; i+1 < len(sc.mca); i += 2 {
		n += "/" + sc.mca[i] + "=" + sc.mca[i+1]
	}
	return n
}

func runSuite(t *testing.T, sc suiteCase, o p2pcheck.Options, checks ...string) {
	opts := []mpitest.Option{mpitest.WithMCA("btl", sc.btl)}
	for i := 0; i+1 < len(sc.mca); i += 2 {
		opts = append(opts, mpitest.WithMCA(sc.mca[i], sc.mca[i+1]))
	}
	mpitest.Run(t, sc.ranks, func(r *mpitest.Rank) error {
		if err := p2pcheck.Run(r.CommWorld(), o, checks...); err != nil {
			return err
		}
		// The same suite on the self communicator, where rank 0 is this
		// process whatever its world rank.
		if r.Rank() == 0 || sc.ranks <= 4 {
			return p2pcheck.Run(r.CommSelf(), o, checks...)
		}
		return nil
	}, opts...)
}

// The matching suite over each transport, with goroutine ranks.
func TestMatchingSuite(t *testing.T) {
	for _, sc := range []suiteCase{
		{ranks: 1, btl: "self", short: true},
		{ranks: 2, btl: "self,shm", short: true},
		{ranks: 4, btl: "self,shm"},
		{ranks: 3, btl: "self,tcp", short: true},
		{ranks: 4, btl: "self,tcp"},
		{ranks: 16, btl: "self,tcp"},
		// Fragments instead of RDMA for every large message.
		{ranks: 3, btl: "self,shm", mca: []string{"pml_ob1_use_rdma", "0"}, short: true},
		{ranks: 1, btl: "self", mca: []string{"pml_ob1_use_rdma", "0"}},
		// Tiny transport limits: many fragments, a full queue at once.
		{ranks: 2, btl: "self,shm", mca: []string{"btl_shm_eager_limit", "256", "btl_shm_max_send_size", "1k", "pml_ob1_use_rdma", "0"}},
		{ranks: 2, btl: "self,tcp", mca: []string{"btl_tcp_eager_limit", "512", "btl_tcp_max_send_size", "2k"}},
	} {
		t.Run(sc.name(), func(t *testing.T) {
			if testing.Short() && !sc.short {
				t.Skip("-short")
			}
			runSuite(t, sc, p2pcheck.Options{Logf: t.Logf})
		})
	}
}

// 64 goroutine ranks on two cores: every check, smaller messages.
func TestMatchingSuite64(t *testing.T) {
	n := 64
	if testing.Short() {
		n = 16
	}
	runSuite(t, suiteCase{ranks: n, btl: "self,shm"}, p2pcheck.Options{Large: 64 << 10, PerPair: 3})
}

// After Finalize, point-to-point calls fail with ErrComm; the
// communicators' groups are the world's and self's.
func TestCommsAfterFinalize(t *testing.T) {
	mpitest.Run(t, 2, func(r *mpitest.Rank) error {
		world, self := r.CommWorld(), r.CommSelf()
		if world.Size() != 2 || world.Rank() != r.Rank() || self.Size() != 1 || self.Rank() != 0 {
			return fmt.Errorf("world %d of %d, self %d of %d", world.Rank(), world.Size(), self.Rank(), self.Size())
		}
		if n, err := world.Group().Size(); n != 2 || err != nil {
			return fmt.Errorf("world group size %d, %v", n, err)
		}
		if me, err := self.Group().Rank(); me != 0 || err != nil {
			return fmt.Errorf("rank in the self group %d, %v", me, err)
		}
		if err := r.Finalize(); err != nil {
			return err
		}
		if err := world.Send(nil, 0, 0); !errors.Is(err, mpi.ErrComm) {
			return fmt.Errorf("Send after Finalize: %v, want ErrComm", err)
		}
		if _, err := self.Irecv(nil, 0, 0); !errors.Is(err, mpi.ErrComm) {
			return fmt.Errorf("Irecv after Finalize: %v, want ErrComm", err)
		}
		return nil
	}, mpitest.WithMCA("btl", "self,shm"))
}
