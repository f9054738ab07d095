package sm

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gompi/gompi/mpierr"
)

// FuzzSegmentHeader: a rank reads the header of the segment rank 0 made.
// checkHeader refuses it with ErrIntern, or it is exactly the header
// writeHeader writes for the ranks and slot size this rank expects; what
// writeHeader writes passes, and fails for another number of ranks or
// another slot size.
func FuzzSegmentHeader(f *testing.F) {
	hdr := make([]byte, segmentSize(2, line))
	writeHeader(hdr, 2, line)
	f.Add(hdr, 2, line)
	f.Add(hdr, 3, line)
	f.Add(hdr[:offSlot+7], 2, line)
	f.Add([]byte{}, 0, 0)
	f.Fuzz(func(t *testing.T, mem []byte, n, slot int) {
		err := checkHeader(mem, n, slot)
		want := make([]byte, max(len(mem), offSlot+8))
		writeHeader(want, n, slot)
		end := offSlot + 8
		if err != nil {
			if !errors.Is(err, mpierr.ErrIntern) {
				t.Fatalf("checkHeader: %v lacks ErrIntern", err)
			}
		} else if !bytes.Equal(mem[:end], want[:end]) {
			t.Fatalf("checkHeader(%x, %d ranks, %d-byte slots) passed; the header is %x", mem[:end], n, slot, want[:end])
		}
		if err := checkHeader(want, n, slot); err != nil {
			t.Fatalf("the header written for %d ranks, %d-byte slots: %v", n, slot, err)
		}
		if checkHeader(want, n+1, slot) == nil || checkHeader(want, n, slot+1) == nil {
			t.Fatalf("the header written for %d ranks, %d-byte slots passes for others", n, slot)
		}
	})
}
