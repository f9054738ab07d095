package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sample = `mode,placement,config,op,metric,ranks,size,value,unit,runs
p2p,far,ompi-vader,p2p,latency,2,0,0.25,us,5
p2p,far,ompi-vader,p2p,latency,2,8,0.26,us,5
p2p,far,ompi-vader,p2p,latency,2,4096,3.1,us,5
p2p,far,ompi-vader,p2p,latency,2,1048576,59.4,us,5
p2p,far,gompi-shm,p2p,latency,2,8,0.2,us,4
p2p,far,gompi-shm,p2p,latency,2,4096,0.5,us,4
p2p,far,gompi-shm,p2p,latency,2,1048576,70,us,4
p2p,far,gompi-shm,p2p,bandwidth,2,0,0,MB/s,4
p2p,far,gompi-shm,p2p,bandwidth,2,8,98,MB/s,4
p2p,far,gompi-shm,p2p,bandwidth,2,4096,14966,MB/s,4
coll,near,ompi,allreduce,time,2,8,0.4,us,3
coll,near,ompi,allreduce,time,2,1024,0.9,us,3
coll,near,mpich,allreduce,time,2,8,0.5,us,3
coll,near,gompi,allreduce,time,2,8,0.3,us,3
coll,near,gompi,allreduce,time,4,8,2.3,us,3
coll,near,gompi,barrier,time,2,0,0.3,us,3
coll,near,gompi,barrier,time,4,0,1.3,us,3
nbc,all,gompi,iallreduce,overlap,2,8,0,%,2
nbc,all,gompi,iallreduce,overlap,2,1024,40,%,2
`

func parse(t *testing.T, s string) []Row {
	t.Helper()
	rows, err := ParseMedians(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestParseMedians(t *testing.T) {
	rows := parse(t, sample)
	if len(rows) != 19 {
		t.Fatalf("got %d rows, want 19", len(rows))
	}
	want := Row{Mode: "p2p", Placement: "far", Config: "ompi-vader", Op: "p2p", Metric: "latency",
		Ranks: 2, Size: 4096, Value: 3.1, Unit: "us", Runs: 5}
	if rows[2] != want {
		t.Errorf("row 3 = %+v, want %+v", rows[2], want)
	}
	// The header may come in another order.
	r := parse(t, "runs,unit,value,size,ranks,metric,op,config,placement,mode\n3,us,1.5,8,2,time,allreduce,gompi,near,coll\n")
	if len(r) != 1 || r[0].Runs != 3 || r[0].Mode != "coll" || r[0].Value != 1.5 {
		t.Errorf("reordered header: got %+v", r)
	}
}

func TestParseMediansErrors(t *testing.T) {
	head := "mode,placement,config,op,metric,ranks,size,value,unit,runs\n"
	for _, c := range []struct{ name, in, want string }{
		{"empty", "", "empty file"},
		{"missing field", "mode,placement,config,op,metric,ranks,size,value,unit,count\n", `no field "runs"`},
		{"twice", "mode,mode,config,op,metric,ranks,size,value,unit,runs\n", `field "mode" twice`},
		{"short row", head + "p2p,far,x,p2p,latency,2,8\n", "wrong number of fields"},
		{"bad size", head + "p2p,far,x,p2p,latency,2,-8,1,us,1\n", `line 2: size "-8"`},
		{"bad value", head + "p2p,far,x,p2p,latency,2,8,NaN,us,1\n", `value "NaN"`},
		{"huge value", head + "p2p,far,x,p2p,latency,2,8,1e308,us,1\n", `value "1e308"`},
		{"bad ranks", head + "p2p,far,x,p2p,latency,0,8,1,us,1\n", `ranks "0"`},
		{"bad runs", head + "p2p,far,x,p2p,latency,2,8,1,us,x\n", `runs "x"`},
		{"empty config", head + "p2p,far,,p2p,latency,2,8,1,us,1\n", "config is empty"},
		{"quote", head + "p2p,\"far,x\n", "medians.csv"},
	} {
		_, err := ParseMedians(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrMedians) {
			t.Errorf("%s: err = %v, want one containing %q and wrapping ErrMedians", c.name, err, c.want)
		}
	}
}

func FuzzParseMedians(f *testing.F) {
	f.Add(sample)
	f.Add("mode,placement,config,op,metric,ranks,size,value,unit,runs\np2p,far,x,p2p,latency,2,8,1e12,us,1\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, in string) {
		rows, err := ParseMedians(strings.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrMedians) {
				t.Fatalf("error %v does not wrap ErrMedians", err)
			}
			return
		}
		// Whatever parses must group and draw without a panic.
		for _, fig := range Figures(rows) {
			if err := Render(fig, io.Discard); err != nil {
				t.Fatalf("render %s: %v", fig.Name, err)
			}
		}
	})
}

func TestFigures(t *testing.T) {
	figs := Figures(parse(t, sample))
	byName := map[string]Figure{}
	for _, f := range figs {
		byName[f.Name] = f
	}
	var names []string
	for n := range byName {
		names = append(names, n)
	}
	for _, n := range []string{"p2p-latency-far", "p2p-bandwidth-far", "coll-allreduce-np2-near", "coll-allreduce-np4-near",
		"coll-barrier-near", "nbc-iallreduce-overlap-np2-all"} {
		if _, ok := byName[n]; !ok {
			t.Errorf("no figure %s; have %v", n, names)
		}
	}
	if len(byName) != 6 {
		t.Errorf("got figures %v, want 6", names)
	}
	lat := byName["p2p-latency-far"]
	if len(lat.Series) != 2 || lat.Series[0].Label != "Open MPI vader" || lat.Series[1].Label != "gompi shm + LLP" {
		t.Fatalf("p2p-latency-far series: %+v", lat.Series)
	}
	// Size 0 has no place on a log axis.
	if got := len(lat.Series[0].Points); got != 3 || lat.Series[0].Points[0].X != 8 {
		t.Errorf("Open MPI vader points %+v: want 8, 4096, 1M", lat.Series[0].Points)
	}
	if !strings.Contains(lat.Title, "far") || !lat.LogY || lat.XLabel != "message size (bytes)" || !strings.Contains(lat.YLabel, "µs") {
		t.Errorf("p2p-latency-far: title %q, x %q, y %q, log y %v", lat.Title, lat.XLabel, lat.YLabel, lat.LogY)
	}
	if bar := byName["coll-barrier-near"]; bar.XLabel != "ranks" || len(bar.Series) != 1 || len(bar.Series[0].Points) != 2 {
		t.Errorf("coll-barrier-near: %+v", bar)
	}
	if ov := byName["nbc-iallreduce-overlap-np2-all"]; ov.LogY || len(ov.Series[0].Points) != 2 {
		t.Errorf("overlap: a linear axis that keeps 0 %%, got %+v", ov)
	}
}

// TestRender draws the sample and checks that each SVG is well-formed XML
// with the title, the axes' labels, the series' names and the size ticks.
func TestRender(t *testing.T) {
	dir := t.TempDir()
	paths, err := WriteAll(Figures(parse(t, sample)), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 6 {
		t.Fatalf("wrote %v, want 6 files", paths)
	}
	b, err := os.ReadFile(filepath.Join(dir, "p2p-latency-far.svg"))
	if err != nil {
		t.Fatal(err)
	}
	text := svgText(t, b)
	for _, want := range []string{"Point to point, one-way latency", "placement far", "message size (bytes)",
		"one-way latency, µs", "Open MPI vader", "gompi shm + LLP", "8", "4k", "1M"} {
		if !strings.Contains(text, want) {
			t.Errorf("p2p-latency-far.svg has no text %q; its text: %s", want, text)
		}
	}
}

// svgText checks that b is a well-formed SVG document and returns its
// character data, joined by newlines.
func svgText(t *testing.T, b []byte) string {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	var text []string
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
		case xml.CharData:
			if s := strings.TrimSpace(string(tok)); s != "" {
				text = append(text, s)
			}
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	return strings.Join(text, "\n")
}

func TestSizeLabel(t *testing.T) {
	for v, want := range map[float64]string{1: "1", 8: "8", 512: "512", 1024: "1k", 4096: "4k", 262144: "256k", 1 << 20: "1M", 4 << 20: "4M", 1536: "1536"} {
		if got := sizeLabel(v); got != want {
			t.Errorf("sizeLabel(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestRunErrors(t *testing.T) {
	dir := t.TempDir()
	if err := run(filepath.Join(dir, "none.csv"), dir); err == nil {
		t.Error("a missing file: no error")
	}
	p := filepath.Join(dir, "m.csv")
	os.WriteFile(p, []byte("mode,placement,config,op,metric,ranks,size,value,unit,runs\n"), 0o644)
	if err := run(p, dir); err == nil || !strings.Contains(err.Error(), "no data") {
		t.Errorf("a header alone: err = %v, want no data", err)
	}
}
