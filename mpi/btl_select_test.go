package mpi_test

import (
	"fmt"
	"testing"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// A BTL is not opened when the BTLs queried before it reach every rank of
// the job with a higher exclusivity (tcp on one node, beside self and shm):
// the BML would give it no peer. It is opened as soon as one rank is not so
// reached (a rank on another node, or shm below tcp), and when one of its
// parameters is set, so that its Query checks them.
func TestBTLNotOpenedWhereOutranked(t *testing.T) {
	for _, c := range []struct {
		name    string
		opts    []mpitest.Option
		wantTCP bool
	}{
		{"one node", []mpitest.Option{mpitest.WithMCA("btl", "self,shm,tcp")}, false},
		{"two nodes", []mpitest.Option{mpitest.WithMCA("btl", "self,shm,tcp"), mpitest.WithNodes([]int{0, 0, 1})}, true},
		{"shm below tcp", []mpitest.Option{mpitest.WithMCA("btl", "self,shm,tcp"), mpitest.WithMCA("btl_shm_exclusivity", "10")}, true},
		{"a tcp parameter set", []mpitest.Option{mpitest.WithMCA("btl", "self,shm,tcp"), mpitest.WithMCA("btl_tcp_latency", "50")}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			mpitest.Run(t, 3, func(r *mpitest.Rank) error {
				w := r.CommWorld()
				got := []int{0}
				if err := mpi.Allreduce(w, []int{w.Rank() + 1}, got, mpi.Sum); err != nil {
					return err
				}
				if got[0] != 6 {
					return fmt.Errorf("allreduce: %d, want 6", got[0])
				}
				if _, open := r.Instance.TransportStats()["tcp"]; open != c.wantTCP {
					return fmt.Errorf("btl tcp in use: %v, want %v", open, c.wantTCP)
				}
				return nil
			}, c.opts...)
		})
	}
}
