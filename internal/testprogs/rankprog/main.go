// Command rankprog is a gompi program whose behaviour the tests choose, for
// end-to-end tests of mpirun and of other launchers.
//
//	rankprog hello                 print rank, size and node
//	rankprog modex [BYTES]         exchange business cards (of BYTES each) and check them
//	rankprog abort RANK CODE       RANK calls Abort(CODE); the others wait
//	rankprog nofinalize RANK       RANK exits 0 without Finalize; the others finalize
//	rankprog sleep                 print "ready <rank>" and sleep a minute
//	rankprog child                 start a child "sleep 60", print "ready <rank> <child pid>", sleep
//	rankprog env VAR…              print VAR=value for each
//	rankprog param NAME…           print NAME=value (source) for each MCA parameter
//	rankprog stdin                 rank 0 copies standard input to standard output
//	rankprog lost VICTIM HOW       the others tell the launcher they lost VICTIM, then fail
//	                               (HOW: abort, or exit with code 1); VICTIM ignores SIGTERM
//	                               and kills itself with SIGKILL 100 ms later: it is reaped
//	                               after their failure
//	rankprog lost VICTIM HOW alive the same, but VICTIM lives on (the others were wrong)
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/gompi/gompi/mpi"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "rankprog: no mode")
		os.Exit(2)
	}
	if os.Args[1] == "lost" && len(os.Args) > 2 && os.Getenv("PMI_RANK") == os.Args[2] {
		// Before Init: the others may fail as soon as Init's fence is over.
		signal.Ignore(syscall.SIGTERM)
	}
	inst, err := mpi.Init()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rankprog:", err)
		os.Exit(1)
	}
	rank, size := inst.Rank(), inst.Size()
	arg := func(i int) int {
		n, err := strconv.Atoi(os.Args[i])
		if err != nil {
			fmt.Fprintln(os.Stderr, "rankprog: bad number", os.Args[i])
			os.Exit(2)
		}
		return n
	}
	switch os.Args[1] {
	case "hello":
		fmt.Printf("rank %d of %d on %s\n", rank, size, inst.Node())
	case "modex":
		m := inst.Runtime().Modex()
		card := func(r int) string {
			c := fmt.Sprintf("card of rank %d", r)
			if len(os.Args) > 2 {
				for n := arg(2); len(c) < n; {
					c += fmt.Sprintf(" %d", len(c)%97)
				}
				c = c[:arg(2)]
			}
			return c
		}
		m.PutProc("card", []byte(card(rank)))
		m.PutNode("node", []byte(fmt.Sprintf("node data from %d", rank)))
		if err := m.Fence(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "rankprog: fence:", err)
			os.Exit(1)
		}
		node0, err := m.GetNode(0, "node")
		if err != nil {
			fmt.Fprintln(os.Stderr, "rankprog:", err)
			os.Exit(1)
		}
		for p := 0; p < size; p++ {
			v, err := m.GetProc(p, "card")
			if err != nil || string(v) != card(p) {
				fmt.Fprintf(os.Stderr, "rankprog: card of rank %d = %q, %v\n", p, v, err)
				os.Exit(1)
			}
		}
		fmt.Printf("modex ok on rank %d of %d; node data %q\n", rank, size, node0)
	case "abort":
		if rank == arg(2) {
			inst.Abort(arg(3))
		}
		time.Sleep(time.Minute)
	case "nofinalize":
		if rank == arg(2) {
			os.Exit(0)
		}
	case "sleep":
		fmt.Printf("ready %d\n", rank)
		time.Sleep(time.Minute)
	case "child":
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "rankprog:", err)
			os.Exit(1)
		}
		fmt.Printf("ready %d %d\n", rank, c.Process.Pid)
		time.Sleep(time.Minute)
	case "env":
		for _, k := range os.Args[2:] {
			v, ok := os.LookupEnv(k)
			if !ok {
				v = "(unset)"
			}
			fmt.Printf("%s=%s\n", k, v)
		}
	case "param":
		for _, name := range os.Args[2:] {
			_, v, ok := inst.Params().Lookup(name)
			if !ok {
				fmt.Printf("%s: no such parameter\n", name)
				continue
			}
			fmt.Printf("%s=%s (%s)\n", name, v, v.Source)
		}
	case "lost":
		victim := arg(2)
		if rank == victim {
			if len(os.Args) > 4 && os.Args[4] == "alive" {
				time.Sleep(time.Minute)
			}
			time.Sleep(100 * time.Millisecond)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		inst.Runtime().PeerLost(victim)
		if os.Args[3] == "abort" {
			inst.Abort(1)
		}
		os.Exit(1)
	case "stdin":
		if rank == 0 {
			io.Copy(os.Stdout, os.Stdin)
		}
	default:
		fmt.Fprintln(os.Stderr, "rankprog: unknown mode", os.Args[1])
		os.Exit(2)
	}
	if err := inst.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "rankprog:", err)
		os.Exit(1)
	}
}
