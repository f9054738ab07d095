package mpi

import (
	"slices"
	"testing"
)

// FuzzParseAgree: an agreement notice's body comes from another process;
// parseAgree takes any bytes without panicking, and what agreeMsg writes
// reads back as written.
func FuzzParseAgree(f *testing.F) {
	c := &Comm{}
	f.Add(agreeMsg(c, noticeContrib, 7, false, []int64{-1, 3})[noticeHdrLen:])
	f.Add(agreeMsg(c, noticeDecide, 1<<31, true, nil)[noticeHdrLen:])
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		k, decided, vals, ok := parseAgree(b)
		if !ok {
			return
		}
		kind := byte(noticeContrib)
		back := agreeMsg(c, kind, k, decided, vals)[noticeHdrLen:]
		k2, d2, v2, ok2 := parseAgree(back)
		if !ok2 || k2 != k || d2 != decided || !slices.Equal(v2, vals) {
			t.Fatalf("%x reads as (%d %v %v), which writes as %x and reads back as (%d %v %v %v)", b, k, decided, vals, back, k2, d2, v2, ok2)
		}
	})
}
