package btl

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"unsafe"

	"github.com/gompi/gompi/mpierr"
)

// FuzzParseCMA: a CMA description comes from a peer. ParseCMA refuses it
// with ErrIntern, or returns its pid and an address inside the described
// buffer with n bytes after it; and what ExposeCMA describes parses back to
// the buffer's own bytes exactly when the access lies inside it.
func FuzzParseCMA(f *testing.F) {
	f.Add(ExposeCMA(make([]byte, 100)), 10, 90, uint16(100), 0, 100)
	f.Add(ExposeCMA(nil), 0, 0, uint16(0), 0, 0)
	wraps := ExposeCMA(nil)
	binary.LittleEndian.PutUint64(wraps[4:], ^uint64(0)-7)
	binary.LittleEndian.PutUint64(wraps[12:], 16)
	f.Add(wraps, 0, 8, uint16(8), 8, 1)
	f.Add([]byte{1, 2, 3}, -1, 1<<62, uint16(1), -1, 2)
	f.Fuzz(func(t *testing.T, desc []byte, off, n int, bufLen uint16, bufOff, bufN int) {
		pid, addr, err := ParseCMA(desc, off, n)
		if err != nil {
			if !errors.Is(err, mpierr.ErrIntern) {
				t.Fatalf("ParseCMA(%x, %d, %d): %v lacks ErrIntern", desc, off, n, err)
			}
		} else {
			le := binary.LittleEndian
			base, size := le.Uint64(desc[4:]), le.Uint64(desc[12:])
			a := uint64(addr)
			if pid != int(le.Uint32(desc)) || pid <= 0 || int(int32(pid)) != pid {
				t.Fatalf("ParseCMA(%x): pid %d", desc, pid)
			}
			if off < 0 || n < 0 || a != base+uint64(off) || a < base || a+uint64(n) < a || a+uint64(n) > base+size || base+size < base {
				t.Fatalf("ParseCMA(%x, %d, %d) = %#x: not %d bytes inside %d at %#x", desc, off, n, a, n, size, base)
			}
		}

		buf := make([]byte, bufLen)
		pid, addr, err = ParseCMA(ExposeCMA(buf), bufOff, bufN)
		inside := bufOff >= 0 && bufN >= 0 && bufOff <= len(buf) && bufN <= len(buf)-bufOff
		switch {
		case inside && err != nil:
			t.Fatalf("%d bytes at %d of an exposed buffer of %d: %v", bufN, bufOff, len(buf), err)
		case !inside && err == nil:
			t.Fatalf("%d bytes at %d of an exposed buffer of %d accepted", bufN, bufOff, len(buf))
		case inside && pid != os.Getpid():
			t.Fatalf("exposed buffer of pid %d, want %d", pid, os.Getpid())
		case inside && len(buf) > 0 && addr != uintptr(unsafe.Pointer(&buf[0]))+uintptr(bufOff):
			t.Fatalf("offset %d of an exposed buffer at %p: address %#x", bufOff, &buf[0], addr)
		}
	})
}
