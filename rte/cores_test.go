package rte

import (
	"strings"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	for s, want := range map[string]int{"0": 1, "0-1": 2, "0-3,6\n": 5, "0,2,4-5": 4} {
		if n, err := ParseCPUList(s); err != nil || n != want {
			t.Errorf("%q: %d, %v; want %d", s, n, err, want)
		}
	}
	for _, s := range []string{"", "a", "3-1", "-1", "0-", "1,,2"} {
		if _, err := ParseCPUList(s); err == nil {
			t.Errorf("%q: no error", s)
		}
	}
}

func TestParseCPUMax(t *testing.T) {
	if _, ok, err := ParseCPUMax("max 100000\n"); ok || err != nil {
		t.Errorf("max: ok %v err %v", ok, err)
	}
	if q, ok, err := ParseCPUMax("250000 100000"); !ok || err != nil || q != 2.5 {
		t.Errorf("2.5 CPUs: %v %v %v", q, ok, err)
	}
	for _, s := range []string{"", "1 0", "x 100", "1 2 3"} {
		if _, _, err := ParseCPUMax(s); err == nil {
			t.Errorf("%q: no error", s)
		}
	}
}

func TestOversubscribedFromLauncher(t *testing.T) {
	for v, want := range map[string]bool{"1": true, "0": false} {
		rt := &Runtime{job: Job{LocalSize: 64}}
		if err := rt.placeCores(map[string]string{OversubscribedEnv: v}); err != nil || rt.job.Oversubscribed != want || rt.job.OversubscribedBy != "mpirun" {
			t.Errorf("%s=%s: %v %v %q", OversubscribedEnv, v, err, rt.job.Oversubscribed, rt.job.OversubscribedBy)
		}
	}
	rt := &Runtime{job: Job{LocalSize: 1 << 20}}
	if err := rt.placeCores(map[string]string{}); err != nil || !rt.job.Oversubscribed || !strings.Contains(rt.job.OversubscribedBy, "this rank") {
		t.Errorf("a million local ranks: %v %v %q", err, rt.job.Oversubscribed, rt.job.OversubscribedBy)
	}
	if err := rt.placeCores(map[string]string{OversubscribedEnv: "yes"}); err == nil || !strings.Contains(err.Error(), "accepted: 0 or 1") {
		t.Errorf("bad value: %v", err)
	}
}

func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0-3,6", "0", "", "9-1", "0-99999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseCPUList(s)
		if err == nil && n < 1 {
			t.Fatalf("%q: %d CPUs and no error", s, n)
		}
	})
}

func FuzzParseCPUMax(f *testing.F) {
	for _, s := range []string{"max 100000", "200000 100000", "1 0", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, ok, err := ParseCPUMax(s)
		if ok && (err != nil || q < 0) {
			t.Fatalf("%q: %v %v %v", s, q, ok, err)
		}
	})
}
