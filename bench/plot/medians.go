package main

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Row is one line of medians.csv, as the summary scripts write it
// (bench/placement.py's MEDIANS_FIELDS): the median over Runs runs of one
// metric of one configuration, at one size and rank count, in one placement.
type Row struct {
	Mode      string // p2p, coll or nbc
	Placement string // near, far, mixed or all
	Config    string // ompi-vader, gompi-shm, ... (p2p); ompi, mpich, gompi (coll, nbc)
	Op        string // p2p, allreduce, barrier, ibarrier, iallreduce
	Metric    string // latency, bandwidth, time, pure, overlap, overlap_t
	Ranks     int
	Size      int64 // bytes
	Value     float64
	Unit      string // us, MB/s, %
	Runs      int
}

// fields is the header that ParseMedians requires, in any order.
var fields = []string{"mode", "placement", "config", "op", "metric", "ranks", "size", "value", "unit", "runs"}

const maxValue = 1e12

// ErrMedians is wrapped by every error of ParseMedians.
var ErrMedians = errors.New("medians.csv")

// ParseMedians reads medians.csv: a header naming every field once (in any
// order, no others), then rows. The file comes from outside the program
// (a results folder, perhaps edited or cut short), so every fault is an
// error that names the line, never a panic.
func ParseMedians(r io.Reader) ([]Row, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = len(fields)
	header, err := cr.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%w: empty file, want a header line %q", ErrMedians, strings.Join(fields, ","))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrMedians, err)
	}
	col := map[string]int{}
	for i, h := range header {
		h = strings.TrimSpace(h)
		if _, dup := col[h]; dup {
			return nil, fmt.Errorf("%w: header: field %q twice", ErrMedians, h)
		}
		col[h] = i
	}
	for _, f := range fields {
		if _, ok := col[f]; !ok {
			return nil, fmt.Errorf("%w: header: no field %q (want %s)", ErrMedians, f, strings.Join(fields, ","))
		}
	}
	var rows []Row
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return rows, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMedians, err)
		}
		// FieldPos only after a record was read: it panics after an error.
		line, _ := cr.FieldPos(0)
		row, err := parseRow(rec, col)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrMedians, line, err)
		}
		rows = append(rows, row)
	}
}

func parseRow(rec []string, col map[string]int) (Row, error) {
	get := func(f string) string { return strings.TrimSpace(rec[col[f]]) }
	row := Row{
		Mode: get("mode"), Placement: get("placement"), Config: get("config"),
		Op: get("op"), Metric: get("metric"), Unit: get("unit"),
	}
	for _, f := range []struct{ name, v string }{
		{"mode", row.Mode}, {"placement", row.Placement}, {"config", row.Config},
		{"op", row.Op}, {"metric", row.Metric}, {"unit", row.Unit},
	} {
		if f.v == "" {
			return Row{}, fmt.Errorf("%s is empty", f.name)
		}
	}
	var err error
	if row.Ranks, err = strconv.Atoi(get("ranks")); err != nil || row.Ranks < 1 {
		return Row{}, fmt.Errorf("ranks %q: want a whole number ≥ 1", get("ranks"))
	}
	if row.Size, err = strconv.ParseInt(get("size"), 10, 64); err != nil || row.Size < 0 {
		return Row{}, fmt.Errorf("size %q: want a whole number of bytes ≥ 0", get("size"))
	}
	// A bound far above any benchmark's figure (1e12 µs is 11 days, 1e12
	// MB/s a petabyte a second) keeps the plot's arithmetic finite.
	if row.Value, err = strconv.ParseFloat(get("value"), 64); err != nil || !(math.Abs(row.Value) <= maxValue) {
		return Row{}, fmt.Errorf("value %q: want a number between -1e12 and 1e12", get("value"))
	}
	if row.Runs, err = strconv.Atoi(get("runs")); err != nil || row.Runs < 1 {
		return Row{}, fmt.Errorf("runs %q: want a whole number ≥ 1", get("runs"))
	}
	return row, nil
}
