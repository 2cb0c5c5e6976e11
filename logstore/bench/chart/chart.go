// Package chart draws the rows of `logplayer bench store --json` as PNG
// charts with gonum/plot: tx/s, p50 and p99 against the client count, a
// line per system. It is apart from package bench so that the shipped
// logplayer binary links no plotting library; the bench tool
// cmd/logplayer-bench draws them (scripts/bench.sh writes
// docs/bench-store-*.png with it).
//
// Goroutines: none.
package chart

import (
	"errors"
	"fmt"
	"image/color"
	"path/filepath"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/logplayer/logplayer/logstore/bench"
)

// Row and System are bench's.
type (
	Row    = bench.Row
	System = bench.System
)

// Chart is one figure Write draws: a line per system of Value
// against the client count.
type Chart struct {
	File  string // base name, e.g. "bench-store-txps.png"
	Title string
	YAxis string
	Log   bool // logarithmic Y axis
	Value func(Row) float64
}

// Charts are the figures of `logplayer-bench chart`: tx/s, p50 and p99
// against clients.
var Charts = []Chart{
	{File: "bench-store-txps.png", Title: "Throughput (higher is better)", YAxis: "transactions/s", Value: func(r Row) float64 { return r.TxPerSec }},
	{File: "bench-store-p50.png", Title: "Latency p50 (lower is better)", YAxis: "p50 (ms)", Log: true, Value: func(r Row) float64 { return ms(r.P50) }},
	{File: "bench-store-p99.png", Title: "Latency p99 (lower is better)", YAxis: "p99 (ms)", Log: true, Value: func(r Row) float64 { return ms(r.P99) }},
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ErrEmptyTable is returned by Write for a table without rows.
var ErrEmptyTable = errors.New("bench: no rows to chart")

// style is how a system's line looks: the LogStore in strong colours
// (wal blue, boltdb orange), its one-connection-per-client variant dashed,
// bare raft green or red and dotted, the gRPC floor grey and dashed.
func style(s System) (color.Color, []vg.Length, draw.GlyphDrawer) {
	blue := color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	orange := color.RGBA{R: 0xe6, G: 0x6b, B: 0x00, A: 0xff}
	green := color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	red := color.RGBA{R: 0xb0, G: 0x30, B: 0x30, A: 0xff}
	dashed := []vg.Length{vg.Points(6), vg.Points(3)}
	dotted := []vg.Length{vg.Points(2), vg.Points(2)}
	switch s {
	case bench.LogStoreWAL:
		return blue, nil, draw.CircleGlyph{}
	case bench.LogStoreWALConns:
		return blue, dashed, draw.RingGlyph{}
	case bench.LogStoreBoltDB:
		return orange, nil, draw.SquareGlyph{}
	case bench.LogStoreBoltDBConns:
		return orange, dashed, draw.BoxGlyph{}
	case bench.RaftWAL:
		return green, dotted, draw.TriangleGlyph{}
	case bench.GRPCConns:
		return color.Gray{Y: 0x60}, dashed, draw.CrossGlyph{}
	default:
		return red, dotted, draw.PyramidGlyph{}
	}
}

// Write writes each of Charts of t into dir as a PNG and returns the
// paths written.
func Write(t bench.Table, dir string) ([]string, error) {
	if len(t.Rows) == 0 {
		return nil, ErrEmptyTable
	}
	var out []string
	for _, c := range Charts {
		p, err := plotOf(t, c)
		if err != nil {
			return out, err
		}
		path := filepath.Join(dir, c.File)
		if err := p.Save(7*vg.Inch, 4.5*vg.Inch, path); err != nil {
			return out, fmt.Errorf("bench: chart %s: %w", path, err)
		}
		out = append(out, path)
	}
	return out, nil
}

func plotOf(t bench.Table, c Chart) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text = "clients (each one Append at a time)"
	p.Y.Label.Text = c.YAxis
	p.X.Scale = plot.LogScale{}
	var ticks plot.ConstantTicks
	for _, n := range t.Levels() {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: strconv.Itoa(n)})
	}
	p.X.Tick.Marker = ticks
	if c.Log {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	} else {
		p.Y.Min = 0
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	for _, s := range t.RowSystems() {
		var xys plotter.XYs
		for _, n := range t.Levels() {
			r, ok := t.Row(s, n)
			if !ok {
				continue
			}
			v := c.Value(r)
			if c.Log && v <= 0 {
				continue // no sample: nothing to put on a log axis
			}
			xys = append(xys, plotter.XY{X: float64(n), Y: v})
		}
		if len(xys) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		col, dashes, glyph := style(s)
		line.Color, line.Dashes, line.Width = col, dashes, vg.Points(1.5)
		points.Color, points.Shape = col, glyph
		p.Add(line, points)
		p.Legend.Add(string(s), line, points)
	}
	return p, nil
}
