package schedule

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/coll/colltest"
	"github.com/gompi/gompi/mpierr"
)

// mirror is peer's side of s: a receive into peer's output of the same
// blocks for each of s's sends to peer, a send of the same blocks of peer's
// input for each of its receives from peer, in the same rounds, so that
// every message of s is matched and of the length s expects.
func mirror(s *Schedule, peer int) *Schedule {
	m := &Schedule{Op: s.Op, Size: s.Size, Rank: peer, Parts: s.Parts}
	for _, round := range s.Rounds {
		var steps []Step
		for _, st := range round {
			if st.Peer != peer {
				continue
			}
			switch st.Kind {
			case Send:
				dst := Output
				if st.Src == None {
					dst = None
				}
				steps = append(steps, Step{Kind: Recv, Peer: s.Rank, Dst: dst, First: st.First, End: st.End})
			case Recv:
				src := Input
				if st.Dst == None {
					src = None
				}
				steps = append(steps, Step{Kind: Send, Peer: s.Rank, Src: src, First: st.First, End: st.End})
			}
		}
		m.Rounds = append(m.Rounds, steps)
	}
	return m
}

// combine is the reduction of the runs: not commutative, so that a reduce
// of the wrong way round shows.
func combine(in, inout []byte) {
	for i := range inout {
		inout[i] = in[i]*7 + inout[i]
	}
}

func pattern(rank, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rank*31 + i*3 + 1)
	}
	return b
}

// checkRun runs a validated schedule s on its rank of a world of s.Size
// ranks, the others running its mirror, with buffers of elems elements of
// elem bytes, and compares every rank's output with what a plain reading
// of s gives: a receive copies the peer's input blocks, a send puts the
// blocks as they are at the start of the round into the peer's output, the
// copies and reduces run in order after the messages. The rank's input is
// never written. Where the operation's in-place form has the same buffers
// (allreduce, scan, alltoall), it runs in place too, every rank's receive
// buffer holding its input: the plain reading is the same, from those
// outputs.
func checkRun(t *testing.T, s *Schedule, elem, elems int) {
	t.Helper()
	for _, inPlace := range []bool{false, true} {
		if inPlace && s.Op != coll.Allreduce && s.Op != coll.Scan && s.Op != coll.Alltoall {
			continue
		}
		checkRunForm(t, s, elem, elems, inPlace)
	}
}

func checkRunForm(t *testing.T, s *Schedule, elem, elems int, inPlace bool) {
	t.Helper()
	n := elem * elems
	off, length := coll.Blocks(n, elem, s.Parts)
	region := func(b []byte, first, end int) []byte {
		if first == end {
			return nil
		}
		return b[off[first] : off[end-1]+length[end-1]]
	}
	// initOut is rank r's receive buffer before the call.
	initOut := func(r int) []byte {
		switch {
		case inPlace:
			return pattern(r, n)
		case r == s.Rank:
			return pattern(100+r, n)
		}
		return make([]byte, n)
	}
	bufs := [numBuffers][]byte{Input: pattern(s.Rank, n), Output: initOut(s.Rank), Scratch: make([]byte, n)}
	peerOut := make([][]byte, s.Size)
	for r := range peerOut {
		peerOut[r] = initOut(r)
	}
	for _, round := range s.Rounds {
		for _, st := range round {
			if st.Kind == Send && st.Src != None {
				copy(region(peerOut[st.Peer], st.First, st.End), region(bufs[st.Src], st.First, st.End))
			}
		}
		for _, st := range round {
			if st.Kind == Recv && st.Dst != None {
				copy(region(bufs[st.Dst], st.First, st.End), region(pattern(st.Peer, n), st.First, st.End))
			}
		}
		for _, st := range round {
			switch st.Kind {
			case Copy:
				copy(region(bufs[st.Dst], st.First, st.End), region(bufs[st.Src], st.First, st.End))
			case Reduce:
				combine(region(bufs[st.Src], st.First, st.End), region(bufs[st.Dst], st.First, st.End))
			}
		}
	}
	peerOut[s.Rank] = bufs[Output]

	args := make([]*coll.Args, s.Size)
	for r := range args {
		args[r] = &coll.Args{Op: s.Op, Send: pattern(r, n), Recv: initOut(r), Reducer: datatype.Reducer{Size: elem, Apply: combine}}
		if inPlace {
			args[r].Send, args[r].InPlace = nil, true
		}
	}
	if s.Op == coll.Exscan {
		// Run leaves rank 0's receive buffer of an exscan as it was.
		peerOut[0] = initOut(0)
	}
	err := colltest.NewWorld(s.Size, false).Run(func(c coll.Comm) error {
		if c.Rank() == s.Rank {
			return Run(c, args[c.Rank()], s)
		}
		return Run(c, args[c.Rank()], mirror(s, c.Rank()))
	})
	if err != nil {
		t.Fatalf("a valid schedule of %d rounds on %d bytes, in place %v, failed: %v", len(s.Rounds), n, inPlace, err)
	}
	for r, a := range args {
		if !bytes.Equal(a.Recv, peerOut[r]) {
			t.Fatalf("in place %v, rank %d of %d (the schedule's: %d), %d bytes in %d parts: output\n%x, want\n%x", inPlace, r, s.Size, s.Rank, n, s.Parts, a.Recv, peerOut[r])
		}
	}
	if !inPlace && !bytes.Equal(args[s.Rank].Send, pattern(s.Rank, n)) {
		t.Fatal("the schedule's run wrote its input")
	}
}

// FuzzDecode: a schedule's wire form comes from a plugin process. Decode
// refuses it with ErrArg, or gives a schedule that encodes back to the
// same bytes; Validate refuses that with ErrArg, or it runs (for up to 8
// ranks) with the results a plain reading of it gives, at sizes that take
// both Run's paths (sends up to coll.SmallExchange, and larger).
func FuzzDecode(f *testing.F) {
	f.Add(ringAllreduce(3, 1).Encode())
	f.Add(ringAllreduce(4, 0).Encode())
	f.Add(disseminationBarrier(5, 2).Encode())
	mixed := &Schedule{Op: coll.Allreduce, Size: 3, Rank: 2, Parts: 4, Rounds: [][]Step{
		{{Kind: Send, Peer: 0, Src: Input, First: 0, End: 4}, {Kind: Recv, Peer: 1, Dst: Scratch, First: 1, End: 3}},
		{{Kind: Reduce, Src: Scratch, Dst: Output, First: 1, End: 3}, {Kind: Copy, Src: Input, Dst: Scratch, First: 3, End: 4}},
		{},
		{{Kind: Recv, Peer: 0}, {Kind: Send, Peer: 1, Src: Scratch, First: 0, End: 2}, {Kind: Send, Peer: 1, First: 2, End: 4}},
	}}
	f.Add(mixed.Encode())
	f.Add([]byte("GSC1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b)
		if err != nil {
			if !errors.Is(err, mpierr.ErrArg) {
				t.Fatalf("Decode: %v lacks ErrArg", err)
			}
			return
		}
		if again := s.Encode(); !bytes.Equal(again, b) {
			t.Fatalf("%x decodes to a schedule that encodes as %x", b, again)
		}
		if err := s.Validate(s.Op, s.Size, s.Rank); err != nil {
			if !errors.Is(err, mpierr.ErrArg) {
				t.Fatalf("Validate: %v lacks ErrArg", err)
			}
			return
		}
		// Validate is given the communicator the host runs on, here the
		// schedule's own: run those a communicator of up to 8 ranks has.
		if s.Rank < s.Size && s.Size <= 8 && s.Parts <= 1024 {
			checkRun(t, s, 2, 700+s.Parts)
		}
	})
}

// FuzzSchedule builds one rank's schedule from fuzzed steps (4 bytes each:
// kind and whether a new round starts, peer, buffers, blocks), mostly
// valid ones, on 2 to 8 ranks: its wire form decodes to a schedule that
// encodes back to it and is valid exactly when the original is; a valid
// one runs with the results a plain reading of it gives.
func FuzzSchedule(f *testing.F) {
	f.Add(uint8(1), uint8(0), uint8(3), uint8(0), uint16(10), []byte{0x00, 0, 1, 0x02, 0x01, 1, 2, 0x12, 0x82, 0, 0x0a, 0x02})
	f.Add(uint8(2), uint8(3), uint8(0), uint8(3), uint16(200), []byte{0x80, 1, 1, 0x10, 0x01, 2, 0, 0x10, 0x02, 0, 0x00, 0x00, 0x83, 0, 0x0b, 0x10})
	f.Add(uint8(6), uint8(7), uint8(15), uint8(1), uint16(1400), []byte{0x00, 3, 2, 0xf0, 0x01, 4, 1, 0xf0, 0x82, 0, 0x0b, 0xf0, 0x03, 0, 0x07, 0x53})
	f.Add(uint8(0), uint8(0), uint8(0), uint8(0), uint16(0), []byte{})
	f.Fuzz(func(t *testing.T, size, rank, parts, elemLog uint8, elems uint16, steps []byte) {
		n := 2 + int(size)%7
		s := &Schedule{Op: coll.Allreduce, Size: n, Rank: int(rank) % n, Parts: 1 + int(parts)%16}
		var round []Step
		for ; len(steps) >= 4; steps = steps[4:] {
			b0, b1, b2, b3 := steps[0], steps[1], steps[2], steps[3]
			if b0&0x80 != 0 && len(round) > 0 {
				s.Rounds, round = append(s.Rounds, round), nil
			}
			st := Step{Kind: Kind(1 + b0%4), Peer: (s.Rank + 1 + int(b1)%(n-1)) % n}
			st.First = int(b3&0x0f) % (s.Parts + 1)
			st.End = st.First + int(b3>>4)%(s.Parts-st.First+1)
			readable := []Buffer{Input, Output, Scratch}
			switch st.Kind {
			case Send:
				st.Src = Buffer(b2 % 4)
			case Recv:
				st.Dst = []Buffer{None, Output, Scratch}[b2%3]
			default:
				st.Peer = 0
				st.Src = readable[b2%3]
				st.Dst = []Buffer{Output, Scratch}[(b2>>2)%2]
				if st.Src == st.Dst {
					st.Src = Input
				}
			}
			round = append(round, st)
		}
		if len(round) > 0 {
			s.Rounds = append(s.Rounds, round)
		}
		wire := s.Encode()
		d, err := Decode(wire)
		if err != nil {
			t.Fatalf("the wire form of %+v: %v", s, err)
		}
		if again := d.Encode(); !bytes.Equal(again, wire) {
			t.Fatalf("%x decodes to a schedule that encodes as %x", wire, again)
		}
		verr := s.Validate(s.Op, s.Size, s.Rank)
		if derr := d.Validate(s.Op, s.Size, s.Rank); (verr == nil) != (derr == nil) {
			t.Fatalf("Validate: %v before the wire, %v after", verr, derr)
		}
		if verr != nil {
			if !errors.Is(verr, mpierr.ErrArg) {
				t.Fatalf("Validate: %v lacks ErrArg", verr)
			}
			return
		}
		checkRun(t, d, 1<<(elemLog%4), int(elems)%1500)
	})
}
