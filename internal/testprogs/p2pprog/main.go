// Command p2pprog exercises point-to-point messaging between real processes,
// for the tests of the PML.
//
//	p2pprog suite [CHECK…]          run the matching suite (internal/p2pcheck) on the world
//	p2pprog flood N DELAY           rank 0 sends N 8-byte messages to rank 1, which starts
//	                                receiving DELAY late; both report their memory
//	p2pprog pingpong N SIZE         ranks 0 and 1 exchange N messages of SIZE bytes and
//	                                rank 0 prints the mean one-way time
//	p2pprog llpstream N DELAY       rank 0 sends rank 1 a stream of N messages of every
//	                                kind (p2pcheck.LLPStream), rank 1 receiving DELAY late
//	p2pprog llpcounters HITS        the LLP counter check (p2pcheck.LLPCounters); HITS says
//	                                whether small blocking sends should hit the LLP
//	p2pprog latesender DELAY        rank 0 sleeps DELAY, then sends to every rank, which
//	                                waits for it (p2pcheck.LateSender); each prints "woken
//	                                rank R: <wait stats>"
//	p2pprog sleeppingpong N         ranks 0 and 1 exchange N messages, the others wait for the
//	                                end (p2pcheck.SleepPingPong); each prints its wait stats
//	p2pprog llphold                 ranks 0 and 1 exchange small messages (so that the LLP's
//	                                boxes exist both ways), print "llphold rank R pid P job J
//	                                hits H", then wait for a message that never comes (tests
//	                                kill them)
//
// flood prints, per rank, "flood rank R: rss_before=B hwm=H growth=G" in
// bytes: VmRSS after Init and a warm-up, VmHWM (the peak) at the end, and
// their difference.
package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/gompi/gompi/internal/p2pcheck"
	"github.com/gompi/gompi/mpi"
)

func main() {
	if len(os.Args) < 2 {
		fail("no mode")
	}
	inst, err := mpi.Init()
	if err != nil {
		fail(err)
	}
	c := inst.CommWorld()
	// P2PPROG_CPUPROFILE=prefix writes a CPU profile per rank, prefix.<rank>.
	if prefix := os.Getenv("P2PPROG_CPUPROFILE"); prefix != "" {
		f, err := os.Create(fmt.Sprintf("%s.%d", prefix, c.Rank()))
		if err != nil {
			fail(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	switch os.Args[1] {
	case "suite":
		if err := p2pcheck.Run(c, p2pcheck.Options{}, os.Args[2:]...); err != nil {
			fail(err)
		}
		fmt.Printf("suite ok rank %d: %+v\n", c.Rank(), inst.PMLStats())
	case "flood":
		if len(os.Args) != 4 {
			fail("flood N DELAY")
		}
		n, err := strconv.Atoi(os.Args[2])
		if err != nil {
			fail(err)
		}
		delay, err := time.ParseDuration(os.Args[3])
		if err != nil {
			fail(err)
		}
		if err := flood(c, n, delay); err != nil {
			fail(err)
		}
	case "pingpong":
		if len(os.Args) != 4 {
			fail("pingpong N SIZE")
		}
		n, err1 := strconv.Atoi(os.Args[2])
		size, err2 := strconv.Atoi(os.Args[3])
		if err1 != nil || err2 != nil {
			fail("pingpong N SIZE")
		}
		if err := pingpong(c, n, size); err != nil {
			fail(err)
		}
	case "llpstream":
		if len(os.Args) != 4 {
			fail("llpstream N DELAY")
		}
		n, err1 := strconv.Atoi(os.Args[2])
		delay, err2 := time.ParseDuration(os.Args[3])
		if err1 != nil || err2 != nil {
			fail("llpstream N DELAY")
		}
		res, err := p2pcheck.LLPStream(c, n, delay)
		if err != nil {
			fail(err)
		}
		switch c.Rank() {
		case 0:
			fmt.Printf("llpstream rank 0: candidates=%d hits=%d fallbacks=%d\n", res.Candidates, res.Hits(), res.Fallbacks())
		case 1:
			fmt.Printf("llpstream rank 1: in order; %+v\n", inst.PMLStats())
		}
	case "llpcounters":
		if len(os.Args) != 3 {
			fail("llpcounters HITS")
		}
		hits, err := strconv.ParseBool(os.Args[2])
		if err != nil {
			fail("llpcounters HITS")
		}
		if err := p2pcheck.LLPCounters(c, hits); err != nil {
			fail(err)
		}
		fmt.Printf("llpcounters ok rank %d: %+v\n", c.Rank(), inst.PMLStats())
	case "latesender":
		if len(os.Args) != 3 {
			fail("latesender DELAY")
		}
		delay, err := time.ParseDuration(os.Args[2])
		if err != nil {
			fail(err)
		}
		if err := p2pcheck.LateSender(c, delay); err != nil {
			fail(err)
		}
		fmt.Printf("woken rank %d: %+v\n", c.Rank(), inst.WaitStats())
	case "sleeppingpong":
		if len(os.Args) != 3 {
			fail("sleeppingpong N")
		}
		n, err := strconv.Atoi(os.Args[2])
		if err != nil {
			fail(err)
		}
		if err := p2pcheck.SleepPingPong(c, n); err != nil {
			fail(err)
		}
		fmt.Printf("woken rank %d: %+v\n", c.Rank(), inst.WaitStats())
	case "llphold":
		if err := hold(c, inst); err != nil {
			fail(err)
		}
	default:
		fail("unknown mode " + os.Args[1])
	}
	if err := inst.Finalize(); err != nil {
		fail(err)
	}
	pprof.StopCPUProfile()
}

func fail(v any) {
	pprof.StopCPUProfile()
	fmt.Fprintln(os.Stderr, "p2pprog:", v)
	os.Exit(1)
}

func flood(c *mpi.Comm, n int, delay time.Duration) error {
	if c.Size() < 2 {
		return fmt.Errorf("flood needs 2 ranks")
	}
	me := c.Rank()
	// Warm up both sides, so that the baseline includes the transport's
	// buffers and the runtime's first allocations.
	buf := make([]byte, 8)
	for i := 0; i < 1000; i++ {
		if me == 0 {
			if err := c.Send(buf, 1, 1); err != nil {
				return err
			}
		} else if me == 1 {
			if _, err := c.Recv(buf, 0, 1); err != nil {
				return err
			}
		}
	}
	if err := p2pcheck.Barrier(c); err != nil {
		return err
	}
	before := memory("VmRSS")
	start := time.Now()
	switch me {
	case 0:
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint64(buf, uint64(i))
			if err := c.Send(buf, 1, 2); err != nil {
				return fmt.Errorf("message %d: %w", i, err)
			}
		}
	case 1:
		time.Sleep(delay)
		for i := 0; i < n; i++ {
			st, err := c.Recv(buf, 0, 2)
			if err != nil {
				return fmt.Errorf("message %d: %w", i, err)
			}
			if got := binary.LittleEndian.Uint64(buf); st.Count != 8 || got != uint64(i) {
				return fmt.Errorf("message %d: got %d (%d bytes)", i, got, st.Count)
			}
		}
	}
	took := time.Since(start)
	hwm := memory("VmHWM")
	fmt.Printf("flood rank %d: rss_before=%d hwm=%d growth=%d took=%v\n", me, before, hwm, hwm-before, took.Round(time.Millisecond))
	return p2pcheck.Barrier(c)
}

// memory reads a line of /proc/self/status, in bytes.
func memory(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		fail(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		name, rest, ok := strings.Cut(s.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			fail(err)
		}
		return kb << 10
	}
	fail("no " + field + " in /proc/self/status")
	return 0
}

func pingpong(c *mpi.Comm, n, size int) error {
	me := c.Rank()
	if c.Size() < 2 || me > 1 {
		return nil
	}
	buf := make([]byte, size)
	peer := 1 - me
	round := func() error {
		if me == 0 {
			if err := c.Send(buf, peer, 1); err != nil {
				return err
			}
			_, err := c.Recv(buf, peer, 1)
			return err
		}
		if _, err := c.Recv(buf, peer, 1); err != nil {
			return err
		}
		return c.Send(buf, peer, 1)
	}
	for i := 0; i < n/10+1; i++ {
		if err := round(); err != nil {
			return err
		}
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := round(); err != nil {
			return err
		}
	}
	if me == 0 {
		d := time.Since(start)
		fmt.Printf("pingpong %d bytes: %.3f us one-way, %.1f MB/s\n", size,
			float64(d.Nanoseconds())/float64(n)/2/1000, float64(size)*float64(2*n)/d.Seconds()/1e6)
	}
	return nil
}

// hold exchanges a few small messages between ranks 0 and 1 both ways,
// reports, and then waits for a message nobody sends.
func hold(c *mpi.Comm, inst *mpi.Instance) error {
	me := c.Rank()
	if me <= 1 && c.Size() > 1 {
		buf := make([]byte, 8)
		for i := 0; i < 100; i++ {
			if me == 0 {
				if err := c.Send(buf, 1, 1); err != nil {
					return err
				}
				if _, err := c.Recv(buf, 1, 1); err != nil {
					return err
				}
			} else {
				if _, err := c.Recv(buf, 0, 1); err != nil {
					return err
				}
				if err := c.Send(buf, 0, 1); err != nil {
					return err
				}
			}
		}
	}
	fmt.Printf("llphold rank %d pid %d job %s hits %d\n", me, os.Getpid(), inst.JobID(), inst.PMLStats().LLPHits)
	_, err := c.Recv(nil, mpi.AnySource, 99)
	return err
}
