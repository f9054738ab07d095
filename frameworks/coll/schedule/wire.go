package schedule

import (
	"encoding/binary"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/mpierr"
)

// The wire form of a schedule, what a plugin sends the host: "GSC1", then
// little-endian op (1 byte), size, rank, parts, rounds (4 bytes each), and
// per round its step count (4 bytes) and steps of kind (1), peer (4), src
// (1), dst (1), first (4), end (4).
var magic = [4]byte{'G', 'S', 'C', '1'}

const stepBytes = 1 + 4 + 1 + 1 + 4 + 4

// Encode is the wire form of s.
func (s *Schedule) Encode() []byte {
	b := append([]byte(nil), magic[:]...)
	b = append(b, byte(s.Op))
	for _, v := range []int{s.Size, s.Rank, s.Parts, len(s.Rounds)} {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	for _, round := range s.Rounds {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(round)))
		for _, st := range round {
			b = append(b, byte(st.Kind))
			b = binary.LittleEndian.AppendUint32(b, uint32(st.Peer))
			b = append(b, byte(st.Src), byte(st.Dst))
			b = binary.LittleEndian.AppendUint32(b, uint32(st.First))
			b = binary.LittleEndian.AppendUint32(b, uint32(st.End))
		}
	}
	return b
}

// Decode reads a wire form. It checks the form and the limits (so that it
// never allocates more than the input justifies), not the meaning: that is
// Validate's.
func Decode(b []byte) (*Schedule, error) {
	bad := func(what string) (*Schedule, error) {
		return nil, mpierr.Errorf(mpierr.ErrArg, "schedule: %s (%d bytes)", what, len(b))
	}
	if len(b) < 4+1+16 || [4]byte(b[:4]) != magic {
		return bad("not a schedule: no " + string(magic[:]) + " header")
	}
	u32 := func(at int) int { return int(binary.LittleEndian.Uint32(b[at:])) }
	s := &Schedule{Op: coll.Op(b[4]), Size: u32(5), Rank: u32(9), Parts: u32(13)}
	rounds := u32(17)
	if s.Op >= coll.NumOps {
		return bad("unknown operation")
	}
	if rounds > MaxRounds {
		return bad("too many rounds")
	}
	at := 21
	steps := 0
	for r := 0; r < rounds; r++ {
		if at+4 > len(b) {
			return bad("cut short")
		}
		k := u32(at)
		at += 4
		steps += k
		if steps > MaxSteps || k > (len(b)-at)/stepBytes {
			return bad("more steps than the bytes hold")
		}
		round := make([]Step, k)
		for i := range round {
			round[i] = Step{Kind: Kind(b[at]), Peer: u32(at + 1), Src: Buffer(b[at+5]), Dst: Buffer(b[at+6]),
				First: u32(at + 7), End: u32(at + 11)}
			at += stepBytes
		}
		s.Rounds = append(s.Rounds, round)
	}
	if at != len(b) {
		return bad("bytes after the last round")
	}
	return s, nil
}
