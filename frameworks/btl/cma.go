package btl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/mpierr"
)

// Cross-memory attach (CMA): process_vm_readv and process_vm_writev copy
// between two processes' memories with one copy, if the kernel lets this
// process trace the other (same user, and Yama or a seccomp profile not in
// the way). A CMA description is the owner's pid and the buffer's address
// and length. The owner keeps the buffer alive and in place: Go never moves
// heap memory, and a buffer kept in a request escapes to the heap.

// CMADescLen is the length of a CMA description.
const CMADescLen = 4 + 8 + 8

// selfPID is this process's pid, read once: os.Getpid is a system call
// every time, and a system call costs 1 to 3 µs on the virtual machines this
// runs on (a paravirtualized kernel), as much as the single copy of 8 KiB
// it would describe.
var selfPID = uint32(os.Getpid())

// ExposeCMA describes buf for process_vm_readv/writev by a peer.
func ExposeCMA(buf []byte) []byte { return AppendCMA(make([]byte, 0, CMADescLen), buf) }

// AppendCMA appends ExposeCMA's description of buf to dst.
func AppendCMA(dst, buf []byte) []byte {
	var addr uint64
	if len(buf) > 0 {
		addr = uint64(uintptr(unsafe.Pointer(&buf[0])))
	}
	dst = binary.LittleEndian.AppendUint32(dst, selfPID)
	dst = binary.LittleEndian.AppendUint64(dst, addr)
	return binary.LittleEndian.AppendUint64(dst, uint64(len(buf)))
}

// ParseCMA reads a description, a peer's data, checking that it names a
// process and a buffer that does not wrap the address space, and that
// [off, off+n) lies inside the buffer. Its errors are ErrIntern.
func ParseCMA(desc []byte, off, n int) (pid int, addr uintptr, err error) {
	if len(desc) != CMADescLen {
		return 0, 0, mpierr.Errorf(mpierr.ErrIntern, "btl: CMA description of %d bytes, want %d", len(desc), CMADescLen)
	}
	p := binary.LittleEndian.Uint32(desc)
	base := binary.LittleEndian.Uint64(desc[4:])
	size := binary.LittleEndian.Uint64(desc[12:])
	switch {
	case p == 0 || p > math.MaxInt32: // pid_t is an int32
		return 0, 0, mpierr.Errorf(mpierr.ErrIntern, "btl: CMA description of pid %d", p)
	case base+size < base:
		return 0, 0, mpierr.Errorf(mpierr.ErrIntern, "btl: CMA description of %d bytes at %#x, past the end of the address space", size, base)
	case off < 0 || n < 0 || uint64(off)+uint64(n) > size:
		return 0, 0, mpierr.Errorf(mpierr.ErrIntern, "btl: CMA access of %d bytes at offset %d, outside a buffer of %d bytes", n, off, size)
	}
	return int(p), uintptr(base + uint64(off)), nil
}

// cmaChunk is the most one process_vm_readv/writev call copies: a few
// hundred µs at the usual 10 to 20 GB/s.
const cmaChunk = 4 << 20

// CMARead copies len(dst) bytes at offset off of the described buffer into
// dst. A refusal by the kernel (EPERM, ENOSYS) is wrapped in ErrNoRDMA.
func CMARead(desc []byte, off int, dst []byte) error {
	return cma(desc, off, dst, false)
}

// CMAWrite copies src to offset off of the described buffer.
func CMAWrite(desc []byte, off int, src []byte) error {
	return cma(desc, off, src, true)
}

func cma(desc []byte, off int, local []byte, write bool) error {
	pid, addr, err := ParseCMA(desc, off, len(local))
	if err != nil || len(local) == 0 {
		return err
	}
	trap := uintptr(unix.SYS_PROCESS_VM_READV)
	if write {
		trap = unix.SYS_PROCESS_VM_WRITEV
	}
	for done := 0; done < len(local); {
		// A raw system call, in chunks: a copy of a few hundred µs is
		// compute to the scheduler. Through the usual entry, the runtime's
		// monitor takes the processor from a call that lasts over 20 µs and
		// starts a thread to look for work, on the same core when mpirun
		// bound the rank to one: measured, a fifth of the bandwidth. The
		// chunk bounds how long a stop-the-world may wait for the call.
		chunk := min(len(local)-done, cmaChunk)
		l := unix.Iovec{Base: &local[done]}
		l.SetLen(chunk)
		r := unix.RemoteIovec{Base: addr + uintptr(done), Len: chunk}
		r1, _, errno := unix.RawSyscall6(trap, uintptr(pid), uintptr(unsafe.Pointer(&l)), 1, uintptr(unsafe.Pointer(&r)), 1, 0)
		n := int(r1)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			err = errno
		}
		if err != nil {
			if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EACCES) {
				return fmt.Errorf("process_vm_%s of pid %d: %v: %w", map[bool]string{false: "readv", true: "writev"}[write], pid, err, ErrNoRDMA)
			}
			if errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("process_vm_readv: pid %d is gone: %w", pid, ErrPeerLost)
			}
			return mpierr.Errorf(mpierr.ErrIntern, "btl: process_vm_%s of pid %d: %w", map[bool]string{false: "readv", true: "writev"}[write], pid, err)
		}
		if n == 0 {
			return mpierr.Errorf(mpierr.ErrIntern, "btl: process_vm transfer of pid %d made no progress", pid)
		}
		done += n
	}
	return nil
}
