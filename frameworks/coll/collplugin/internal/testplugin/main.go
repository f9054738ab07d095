// Command testplugin is a coll plugin that misbehaves on purpose, for the
// loader's tests. Its behaviour is its component name, taken from the file
// name gompi-coll-<name> under which a test installs a copy:
//
//	crashstart   panics before serving
//	hangstart    never starts serving (no go-plugin handshake)
//	wrongcookie  serves with another handshake cookie
//	wrongapi     was built for coll API 99
//	crashquery   panics while answering a communicator's query
//	hangquery    never answers a communicator's query
//	badschedule  answers with a schedule whose peer is outside the communicator
//	once         a correct dissemination barrier, but panics when asked twice
//	             for one communicator shape (the host caches its answers)
//	hostile      a correct dissemination barrier, with stderr that crashed
//	             go-plugin's parser (see hostile) before its handshake and
//	             in every query, through the pipe and the gRPC stream, each
//	             query's last line without its newline
//	hostilequery writes the same and panics while answering a query
//	rooted       a barrier and a bcast written for root 0 (which the host
//	             must refuse: it would run for every root)
//	ringallgather  an allgather round a ring, that reads its input late
//	             (right in place only if the host keeps Input apart)
//	anything else  a correct dissemination barrier
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/coll/collplugin"
	"github.com/gompi/gompi/frameworks/coll/schedule"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mca/plugin/sdk"
)

func main() {
	name := strings.TrimPrefix(filepath.Base(os.Args[0]), "gompi-coll-")
	// The stderr pipe itself: go-plugin's Serve points os.Stderr at its
	// gRPC stream.
	pipe := os.Stderr
	// The plugin fills ops, each with sched's schedule: by default the
	// barrier alone.
	ops := []coll.Op{coll.Barrier}
	sched := func(op coll.Op, size, rank int, _ map[string]string) (*schedule.Schedule, error) {
		return dissemination(size, rank), nil
	}
	switch name {
	case "crashstart":
		panic("testplugin: crashing at start on purpose")
	case "hangstart":
		time.Sleep(time.Hour) // the host gives up long before
		return
	case "wrongcookie":
		goplugin.Serve(&goplugin.ServeConfig{
			HandshakeConfig: goplugin.HandshakeConfig{ProtocolVersion: 1, MagicCookieKey: "SOME_OTHER_PROGRAM", MagicCookieValue: "x"},
			Plugins:         goplugin.PluginSet{},
			GRPCServer:      goplugin.DefaultGRPCServer,
		})
		return
	case "wrongapi":
		sdk.Serve(sdk.Guest{Info: mca.Info{Framework: "coll", Name: name, Version: mca.Version{Major: 1}, API: mca.Version{Major: 99}}})
		return
	case "crashquery":
		sched = func(coll.Op, int, int, map[string]string) (*schedule.Schedule, error) {
			panic("testplugin: crashing in a query on purpose")
		}
	case "hangquery":
		sched = func(coll.Op, int, int, map[string]string) (*schedule.Schedule, error) { select {} }
	case "once":
		var mu sync.Mutex
		seen := map[[2]int]bool{}
		sched = func(op coll.Op, size, rank int, _ map[string]string) (*schedule.Schedule, error) {
			mu.Lock()
			defer mu.Unlock()
			if seen[[2]int{size, rank}] {
				panic(fmt.Sprintf("testplugin: asked twice for rank %d of %d", rank, size))
			}
			seen[[2]int{size, rank}] = true
			return dissemination(size, rank), nil
		}
	case "hostile":
		hostile(pipe, "before the handshake")
		sched = func(op coll.Op, size, rank int, _ map[string]string) (*schedule.Schedule, error) {
			hostile(pipe, "during a query, through the pipe")
			hostile(os.Stderr, "during a query, through the stream")
			// The next query's first line completes these.
			fmt.Fprint(pipe, "no newline yet, ")
			fmt.Fprint(os.Stderr, "no newline yet, ")
			return dissemination(size, rank), nil
		}
	case "hostilequery":
		sched = func(coll.Op, int, int, map[string]string) (*schedule.Schedule, error) {
			hostile(pipe, "before a crash")
			panic("testplugin: crashing after hostile stderr on purpose")
		}
	case "rooted":
		ops = []coll.Op{coll.Barrier, coll.Bcast}
		sched = func(op coll.Op, size, rank int, _ map[string]string) (*schedule.Schedule, error) {
			if op == coll.Bcast {
				return bcastFromZero(size, rank), nil
			}
			return dissemination(size, rank), nil
		}
	case "ringallgather":
		ops = []coll.Op{coll.Allgather}
		sched = func(op coll.Op, size, rank int, _ map[string]string) (*schedule.Schedule, error) {
			return ringAllgather(size, rank), nil
		}
	case "badschedule":
		sched = func(op coll.Op, size, rank int, _ map[string]string) (*schedule.Schedule, error) {
			s := dissemination(size, rank)
			if len(s.Rounds) > 0 {
				s.Rounds[0][0].Peer = size + 7
			}
			return s, nil
		}
	}
	collplugin.Serve(collplugin.Guest{Name: name, Version: mca.Version{Major: 1}, Priority: 60, Ops: ops, Schedule: sched})
}

// hostile writes lines that go-plugin v1.8.0's stderr parser panicked on
// (@message, @level or @timestamp not strings), a JSON value that is no
// object, invalid UTF-8 and a line longer than go-plugin's buffer, then an
// hclog line that says when, which the host logs as a warning.
func hostile(w *os.File, when string) {
	fmt.Fprintf(w, "{\"@message\":1}\n{\"@level\":2,\"@message\":\"x\"}\n{\"@level\":\"info\",\"@message\":\"x\",\"@timestamp\":3}\n"+
		"{\"@level\":\"error\",\"@message\":{\"nested\":true}}\nnull\nbad \xff\xfe utf8\n%s\n", strings.Repeat("x", 200000))
	fmt.Fprintf(w, "{\"@level\":\"warn\",\"@message\":\"hostile stderr\",\"when\":%q}\n", when)
}

func dissemination(n, me int) *schedule.Schedule {
	s := &schedule.Schedule{Op: coll.Barrier, Size: n, Rank: me, Parts: 1}
	for k := 1; k < n; k <<= 1 {
		s.Rounds = append(s.Rounds, []schedule.Step{{Kind: schedule.Send, Peer: (me + k) % n}, {Kind: schedule.Recv, Peer: (me - k + n) % n}})
	}
	return s
}

// bcastFromZero: rank 0 sends its buffer to every other rank.
func bcastFromZero(n, me int) *schedule.Schedule {
	s := &schedule.Schedule{Op: coll.Bcast, Size: n, Rank: me, Parts: 1}
	var round []schedule.Step
	if me == 0 {
		for r := 1; r < n; r++ {
			round = append(round, schedule.Step{Kind: schedule.Send, Peer: r, Src: schedule.Output, First: 0, End: 1})
		}
	} else {
		round = append(round, schedule.Step{Kind: schedule.Recv, Peer: 0, Dst: schedule.Output, First: 0, End: 1})
	}
	s.Rounds = [][]schedule.Step{round}
	return s
}

// ringAllgather passes blocks round a ring, n parts. Input is the rank's
// block alone (Input [0, 1)), sent on in the first round; a step keeps its
// block index, so the rank's own block comes back from the next rank last.
func ringAllgather(n, me int) *schedule.Schedule {
	s := &schedule.Schedule{Op: coll.Allgather, Size: n, Rank: me, Parts: n}
	step := func(k schedule.Kind, peer int, src, dst schedule.Buffer, b int) schedule.Step {
		return schedule.Step{Kind: k, Peer: peer, Src: src, Dst: dst, First: b, End: b + 1}
	}
	if n == 1 {
		s.Rounds = [][]schedule.Step{{step(schedule.Copy, 0, schedule.Input, schedule.Output, 0)}}
		return s
	}
	mod := func(b int) int { return ((b % n) + n) % n }
	next, prev := mod(me+1), mod(me-1)
	for k := 0; k < n-1; k++ {
		send := step(schedule.Send, next, schedule.Output, schedule.None, mod(me-k))
		if k == 0 {
			send = step(schedule.Send, next, schedule.Input, schedule.None, 0)
		}
		s.Rounds = append(s.Rounds, []schedule.Step{send, step(schedule.Recv, prev, schedule.None, schedule.Output, mod(me-k-1))})
	}
	s.Rounds = append(s.Rounds, []schedule.Step{
		step(schedule.Send, prev, schedule.Output, schedule.None, prev),
		step(schedule.Recv, next, schedule.None, schedule.Output, me),
	})
	return s
}
