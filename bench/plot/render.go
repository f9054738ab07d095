package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Width and height of every plot: wide enough for six legend entries
// beside the curves, small enough to sit in a page of the guide.
const width, height = 7 * vg.Inch, 4.5 * vg.Inch

// Render draws f as an SVG document on w.
func Render(f Figure, w io.Writer) (err error) {
	// gonum/plot panics on some degenerate inputs; the data come from
	// outside, so a panic that build's checks missed becomes an error.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("plot %s: %v", f.Name, r)
		}
	}()
	p, err := build(f)
	if err != nil {
		return err
	}
	c := vgsvg.New(width, height)
	p.Draw(draw.New(c))
	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("plot %s: writing SVG: %w", f.Name, err)
	}
	return nil
}

// build lays f out as a gonum plot.
func build(f Figure) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = f.Title
	// The titles name the placement and its probe bound: at the default
	// size they ran past the right edge.
	p.Title.TextStyle.Font.Size = vg.Points(10)
	p.X.Label.Text = f.XLabel
	p.Y.Label.Text = f.YLabel
	var xs []float64
	for _, s := range f.Series {
		for _, pt := range s.Points {
			xs = append(xs, pt.X)
		}
	}
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = sizeTicks(xs)
	if f.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.Padding = vg.Millimeter
	p.Legend.YOffs = -vg.Millimeter
	for i, s := range f.Series {
		xy := make(plotter.XYs, len(s.Points))
		for j, pt := range s.Points {
			xy[j].X, xy[j].Y = pt.X, pt.Y
		}
		line, points, err := plotter.NewLinePoints(xy)
		if err != nil {
			return nil, fmt.Errorf("plot %s, series %q: %w", f.Name, s.Label, err)
		}
		// Colour and marker both change per series, so that lines stay
		// apart in grey print and for colour-blind readers.
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(1.2)
		line.Dashes = plotutil.Dashes(i / len(plotutil.DefaultColors))
		points.Color = plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		points.Radius = vg.Points(3)
		p.Add(line, points)
		p.Legend.Add(s.Label, line, points)
	}
	// The ranges are set here rather than left to gonum: it widens a range
	// of one value by ±1, which reaches 0 and panics on a log axis (one
	// rank count, one size). Headroom above the highest point keeps the
	// legend (top left, where curves that rise with size leave room) off
	// the data.
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range f.Series {
		for _, pt := range s.Points {
			xmin, xmax = math.Min(xmin, pt.X), math.Max(xmax, pt.X)
			ymin, ymax = math.Min(ymin, pt.Y), math.Max(ymax, pt.Y)
		}
	}
	if xmin > xmax {
		return nil, fmt.Errorf("plot %s: no points", f.Name)
	}
	if xmin <= 0 || f.LogY && ymin <= 0 {
		return nil, fmt.Errorf("plot %s: a value ≤ 0 on a log axis", f.Name)
	}
	if xmin == xmax {
		xmin, xmax = xmin/2, xmax*2
	}
	p.X.Min, p.X.Max = xmin/1.2, xmax*1.2
	if f.LogY {
		n := float64(len(f.Series))
		if ymin == ymax {
			ymin, ymax = ymin/2, ymax*2
		}
		p.Y.Min, p.Y.Max = ymin/1.2, ymax*math.Pow(10, 0.15*n)
	} else {
		// The linear axis is overlap's, in percent: 0 to 100 unless the
		// data leave it.
		p.Y.Min, p.Y.Max = math.Min(0, ymin), math.Max(100, ymax*1.1)
	}
	return p, nil
}

// WriteAll renders every figure into dir as <name>.svg and returns the
// paths written.
func WriteAll(figs []Figure, dir string) ([]string, error) {
	var paths []string
	for _, f := range figs {
		path := filepath.Join(dir, f.Name+".svg")
		out, err := os.Create(path)
		if err != nil {
			return paths, fmt.Errorf("plot %s: %w", f.Name, err)
		}
		err = Render(f, out)
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("plot %s: %w", f.Name, cerr)
		}
		if err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// sizeLabel writes a byte count as benchmark tables do: 512, 4k, 256k, 1M.
func sizeLabel(v float64) string {
	n := int64(math.Round(v))
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "M"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "k"
	}
	return strconv.FormatInt(n, 10)
}

// sizeTicks labels the sizes that were measured when they are few (every
// benchmark's default), else the powers of 8 (1, 8, 64, 512, 4k, ...);
// powers of 2 between them get unlabelled ticks.
func sizeTicks(xs []float64) plot.Ticker {
	const minLabelGap = 3.5
	seen := map[float64]bool{}
	var major []float64
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			major = append(major, x)
		}
	}
	if len(major) > 14 {
		major = nil
	}
	slices.Sort(major)
	return plot.TickerFunc(func(min, max float64) []plot.Tick {
		var ts []plot.Tick
		labelled := map[float64]bool{}
		// A measured size within a factor of minLabelGap of the last
		// labelled one gets a tick but no label: 8k, 16k and 32k labelled
		// side by side ran into each other ("16k32k64k").
		last := 0.0
		for _, x := range major {
			if x < min || x > max {
				continue
			}
			l := ""
			if last == 0 || x >= last*minLabelGap {
				l, last = sizeLabel(x), x
			}
			ts = append(ts, plot.Tick{Value: x, Label: l})
			labelled[x] = true
		}
		for e := 0; e < 63; e++ {
			v := math.Ldexp(1, e)
			if v < min || v > max || labelled[v] {
				continue
			}
			l := ""
			if major == nil && e%3 == 0 {
				l = sizeLabel(v)
			}
			ts = append(ts, plot.Tick{Value: v, Label: l})
		}
		return ts
	})
}

// logTicks labels 1, 2 and 5 times the powers of ten when the range spans
// at most two decades, else only the powers of ten, so that a log axis
// always carries a few labels.
type logTicks struct{}

func (logTicks) Ticks(min, max float64) []plot.Tick {
	if min <= 0 || max <= min {
		return nil
	}
	lo, hi := math.Floor(math.Log10(min)), math.Ceil(math.Log10(max))
	dense := hi-lo <= 2
	var ts []plot.Tick
	for e := lo; e <= hi; e++ {
		for m := 1.0; m < 10; m++ {
			v := m * math.Pow(10, e)
			if v < min || v > max {
				continue
			}
			l := ""
			if m == 1 || dense && (m == 2 || m == 5) {
				l = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ts = append(ts, plot.Tick{Value: v, Label: l})
		}
	}
	return ts
}
