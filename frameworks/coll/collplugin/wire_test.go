package collplugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/coll/collhost"
	"github.com/gompi/gompi/frameworks/coll/schedule"
	"github.com/gompi/gompi/mpierr"
)

// dissemination is the dissemination barrier's schedule.
func dissemination(size, rank int) *schedule.Schedule {
	s := &schedule.Schedule{Op: coll.Barrier, Size: size, Rank: rank, Parts: 1}
	for k := 1; k < size; k <<= 1 {
		s.Rounds = append(s.Rounds, []schedule.Step{{Kind: schedule.Send, Peer: (rank + k) % size}, {Kind: schedule.Recv, Peer: (rank - k + size) % size}})
	}
	return s
}

func barrierReply(t testing.TB, size, rank int) []byte {
	b, err := json.Marshal(collhost.Reply{Schedules: map[string][]byte{"barrier": dissemination(size, rank).Encode()}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The guest's answer, through the wire, is what the host runs.
func TestGuestAnswerParses(t *testing.T) {
	g := Guest{Name: "x", Ops: []coll.Op{coll.Barrier, coll.Bcast}, Schedule: func(op coll.Op, size, rank int, _ map[string]string) (*schedule.Schedule, error) {
		if op != coll.Barrier {
			return nil, nil
		}
		return &schedule.Schedule{Op: op, Size: size, Rank: rank, Parts: 1, Rounds: [][]schedule.Step{{{Kind: schedule.Send, Peer: (rank + 1) % size}, {Kind: schedule.Recv, Peer: (rank + size - 1) % size}}}}, nil
	}}
	req, _ := json.Marshal(collhost.Request{Size: 3, Rank: 2})
	b, err := g.answer(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := collhost.ParseReply(b, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[coll.Barrier] == nil {
		t.Errorf("schedules %v, want the barrier only", got)
	}
}

// A reply the host cannot use is an ErrArg error that says why; it never
// reaches the run.
func TestParseReplyRefuses(t *testing.T) {
	if _, _, err := collhost.ParseReply(barrierReply(t, 4, 1), 4, 1); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		reply []byte
		says  string // why
	}{
		"not JSON":         {[]byte("{"), "not JSON"},
		"an unknown op":    {[]byte(`{"schedules":{"teleport":"R1NDMQ=="}}`), `unknown operation "teleport"`},
		"not a schedule":   {[]byte(`{"schedules":{"barrier":"aGVsbG8="}}`), "coll plugin reply, barrier: "},
		"for another rank": {barrierReply(t, 4, 2), "made for barrier, rank 2 of 4"},
		"for another size": {barrierReply(t, 8, 1), "made for barrier, rank 1 of 8"},
		// A bcast written for root 0 would be run for every root.
		"a rooted operation": {rootedReply(t), "schedule for bcast, rank 1 of 4: gompi runs no schedule for bcast: its calls differ by root"},
	} {
		if _, _, err := collhost.ParseReply(c.reply, 4, 1); !errors.Is(err, mpierr.ErrArg) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want ErrArg saying %q", name, err, c.says)
		}
	}
}

// rootedReply fills barrier and bcast, the bcast from root 0, for rank 1
// of 4: it receives from rank 0.
func rootedReply(t testing.TB) []byte {
	bcast := &schedule.Schedule{Op: coll.Bcast, Size: 4, Rank: 1, Parts: 1, Rounds: [][]schedule.Step{{{Kind: schedule.Recv, Peer: 0, Dst: schedule.Output, First: 0, End: 1}}}}
	b, err := json.Marshal(collhost.Reply{Schedules: map[string][]byte{"barrier": dissemination(4, 1).Encode(), "bcast": bcast.Encode()}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func FuzzParseReply(f *testing.F) {
	f.Add(barrierReply(f, 4, 1))
	f.Add([]byte(`{"declined":"no"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = collhost.ParseReply(b, 4, 1)
	})
}

// docs/plugin-wire.md's coll query is the host's request and the guest's
// reply byte for byte, and its handshake table gives coll's protocol
// version as the coll API's major number.
func TestWireDocQuery(t *testing.T) {
	b, err := os.ReadFile("../../../docs/plugin-wire.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	req, _ := json.Marshal(collhost.Request{Size: 4, Rank: 1})
	g := Guest{Ops: []coll.Op{coll.Barrier}, Schedule: func(op coll.Op, size, rank int, _ map[string]string) (*schedule.Schedule, error) {
		return dissemination(size, rank), nil
	}}
	rep, err := g.answer(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Request: `" + string(req) + "`",
		"\n" + string(rep) + "\n",
		fmt.Sprintf("| `coll` | %d |", coll.Framework.API.Major),
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/plugin-wire.md does not say %s", want)
		}
	}
}
