package mpi_test

import (
	"fmt"
	"testing"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// tcpSent reads an instance's tcp counts; tcp must be the only BTL that
// reports (self does not count).
func tcpSent(inst *mpi.Instance) (mpi.TransportStats, error) {
	s := inst.TransportStats()
	if _, ok := s["tcp"]; !ok || len(s) != 1 {
		return mpi.TransportStats{}, fmt.Errorf("TransportStats = %+v, want tcp's counts alone", s)
	}
	return s["tcp"], nil
}

// sub is what was sent between two readings.
func sub(after, before mpi.TransportStats) mpi.TransportStats {
	return mpi.TransportStats{Frames: after.Frames - before.Frames, Bytes: after.Bytes - before.Bytes}
}

// TransportStats counts what tcp sends, message by message: an eager
// message is one frame of its bytes plus the PML's header, the same header
// at every size; a message to oneself (btl self) is not tcp's; a
// rendezvous is several frames from the sender carrying every byte, and at
// least one (the acknowledgement) from the receiver; a rank that takes no
// part sends nothing.
func TestTransportStatsCountsTCPMessages(t *testing.T) {
	const k = 5
	const small, medium, large = 100, 3000, 1 << 20
	mpitest.Run(t, 3, func(r *mpitest.Rank) error {
		c := r.CommWorld()
		me := c.Rank()
		if err := c.Barrier(); err != nil {
			return err
		}
		// Each phase: every rank reads its counts, does its part, reads
		// again; check judges the difference.
		phase := func(name string, part func() error, check func(d mpi.TransportStats) error) error {
			before, err := tcpSent(r.Instance)
			if err != nil {
				return err
			}
			if err := part(); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			after, err := tcpSent(r.Instance)
			if err != nil {
				return err
			}
			if err := check(sub(after, before)); err != nil {
				return fmt.Errorf("%s: rank %d: %w", name, me, err)
			}
			// The barrier's own frames fall between phases.
			return c.Barrier()
		}
		nothing := func(d mpi.TransportStats) error {
			if d != (mpi.TransportStats{}) {
				return fmt.Errorf("sent %+v, want nothing", d)
			}
			return nil
		}
		// eager sends size bytes k times from rank 0 to each of the
		// ranks in to, and returns, at rank 0, the header per frame.
		var hdr [2]uint64
		eager := func(i, size int, to ...int) error {
			return phase(fmt.Sprintf("%d eager messages of %d bytes to %v", k, size, to), func() error {
				buf := make([]byte, size)
				for _, dst := range to {
					for range k {
						if me == 0 {
							if err := c.Send(buf, dst, 7); err != nil {
								return err
							}
						} else if me == dst {
							if _, err := c.Recv(buf, 0, 7); err != nil {
								return err
							}
						}
					}
				}
				return nil
			}, func(d mpi.TransportStats) error {
				if me != 0 {
					return nothing(d)
				}
				frames := uint64(k * len(to))
				if d.Frames != frames || d.Bytes < frames*uint64(size) || (d.Bytes-frames*uint64(size))%frames != 0 {
					return fmt.Errorf("sent %+v, want %d frames of %d bytes plus one header each", d, frames, size)
				}
				hdr[i] = (d.Bytes - frames*uint64(size)) / frames
				if hdr[i] == 0 || hdr[i] > 64 {
					return fmt.Errorf("sent %+v: %d bytes of header per frame, want 1 to 64", d, hdr[i])
				}
				return nil
			})
		}
		if err := eager(0, small, 1, 2); err != nil {
			return err
		}
		if err := eager(1, medium, 1); err != nil {
			return err
		}
		if me == 0 && hdr[0] != hdr[1] {
			return fmt.Errorf("%d bytes of header per eager message of %d bytes, %d per message of %d: want the same", hdr[0], small, hdr[1], medium)
		}
		err := phase("a message to oneself", func() error {
			buf := make([]byte, medium)
			req, err := c.Isend(buf, me, 8)
			if err != nil {
				return err
			}
			if _, err := c.Recv(make([]byte, medium), me, 8); err != nil {
				return err
			}
			_, err = req.Wait()
			return err
		}, nothing)
		if err != nil {
			return err
		}
		return phase(fmt.Sprintf("a rendezvous of %d bytes from rank 0 to rank 1", large), func() error {
			buf := make([]byte, large)
			switch me {
			case 0:
				return c.Send(buf, 1, 9)
			case 1:
				_, err := c.Recv(buf, 0, 9)
				return err
			}
			return nil
		}, func(d mpi.TransportStats) error {
			switch me {
			case 0:
				if d.Frames < 2 || d.Bytes < large || d.Bytes > large+64*d.Frames {
					return fmt.Errorf("sent %+v, want at least 2 frames that carry the %d bytes, with at most 64 bytes of header each", d, large)
				}
			case 1:
				if d.Frames < 1 || d.Bytes > 64*d.Frames {
					return fmt.Errorf("sent %+v, want at least one frame (the acknowledgement) of headers only", d)
				}
			default:
				return nothing(d)
			}
			return nil
		})
	}, mpitest.WithMCA("btl", "self,tcp"), mpitest.WithMCA("llp", "^tofu"))
}

// TransportStats of an instance that is not up says so by being empty.
func TestTransportStatsAfterFinalize(t *testing.T) {
	inst, err := mpi.Init()
	if err != nil {
		t.Fatal(err)
	}
	if s := inst.TransportStats(); s == nil {
		t.Errorf("TransportStats of a live singleton is nil, want a map")
	}
	if err := inst.Finalize(); err != nil {
		t.Fatal(err)
	}
	if s := inst.TransportStats(); len(s) != 0 {
		t.Errorf("TransportStats after Finalize = %+v, want empty", s)
	}
}
