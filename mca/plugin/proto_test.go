package plugin

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gompi/gompi/mpierr"
)

func goodDescription() Description {
	return Description{Framework: "coll", Name: "ring", Version: [3]int{1, 2, 3}, API: [3]int{1, 0, 0}, Priority: 50,
		Params: []ParamSpec{
			{Name: "coll_ring_enable", Type: "bool", Default: "true", Level: 3},
			{Name: "coll_ring_mode", Type: "enum", Default: "fast", Level: 5, Values: []EnumSpec{{0, "fast"}, {1, "slow"}}},
			{Name: "coll_ring_depth", Type: "int", Default: "4", Level: 5, Range: &[2]int64{1, 64}},
		}}
}

func TestParseDescription(t *testing.T) {
	b, _ := json.Marshal(goodDescription())
	d, err := ParseDescription(b, "coll", "ring")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Info().Version.String(); got != "1.2.3" {
		t.Errorf("version %s, want 1.2.3", got)
	}
	if defs := d.Defs(); len(defs) != 3 || defs[2].Range.Max != 64 || defs[1].Values[1].Name != "slow" {
		t.Errorf("defs %+v", defs)
	}
}

// A description that does not fit its file name, or declares a parameter
// the host could not register, is refused with the reason.
func TestParseDescriptionRefuses(t *testing.T) {
	for _, c := range []struct {
		name, want string
		edit       func(d *Description)
	}{
		{"another name", "file name says coll/ring", func(d *Description) { d.Name = "other" }},
		{"another framework", "file name says coll/ring", func(d *Description) { d.Framework = "btl" }},
		{"a foreign parameter", `starting with "coll_ring_"`, func(d *Description) { d.Params[0].Name = "btl_shm_size" }},
		{"the priority parameter", "reserved priority", func(d *Description) { d.Params[0].Name = "coll_ring_priority" }},
		{"a parameter twice", "declared twice", func(d *Description) { d.Params[1].Name = d.Params[0].Name }},
		{"an unknown type", "accepted: bool, int", func(d *Description) { d.Params[0].Type = "float" }},
		{"a bad level", "level 0", func(d *Description) { d.Params[0].Level = 0 }},
		{"an enum without values", "needs values", func(d *Description) { d.Params[1].Values = nil }},
		{"an upside-down range", "min <= max", func(d *Description) { d.Params[2].Range = &[2]int64{9, 1} }},
		{"a repeated enum value", "repeated", func(d *Description) { d.Params[1].Values[1].Name = "fast" }},
	} {
		d := goodDescription()
		d.Params = append([]ParamSpec(nil), d.Params...)
		d.Params[1].Values = append([]EnumSpec(nil), d.Params[1].Values...)
		c.edit(&d)
		b, _ := json.Marshal(d)
		_, err := ParseDescription(b, "coll", "ring")
		if !errors.Is(err, mpierr.ErrArg) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrArg saying %q", c.name, err, c.want)
		}
	}
	if _, err := ParseDescription([]byte("{"), "coll", "ring"); !errors.Is(err, mpierr.ErrArg) {
		t.Errorf("truncated JSON: %v", err)
	}
}

func FuzzParseDescription(f *testing.F) {
	b, _ := json.Marshal(goodDescription())
	f.Add(b)
	f.Add([]byte(`{"framework":"coll","name":"ring","params":[{"name":"coll_ring_x","type":"list","level":1,"values":[{"value":1,"name":""}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDescription(b, "coll", "ring")
		if err == nil {
			_ = d.Defs()
		}
	})
}

// The stderr note keeps a panic's first lines and drops go-plugin's debug
// chatter.
func TestStderrNote(t *testing.T) {
	in := `{"@level":"debug","@message":"plugin address"}` + "\nnoise\npanic: boom\n\ngoroutine 1 [running]:\nmain.main()\n\tmain.go:3\n"
	if got, want := stderrNote(in), "; its stderr: panic: boom | goroutine 1 [running]: | main.main()"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := stderrNote(`{"@level":"debug","@message":"x"}`); got != "" {
		t.Errorf("debug only: %q", got)
	}
}
