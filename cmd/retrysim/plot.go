package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/retrykit/retry/cmd/retrysim/internal/sim"
)

// strategyColor gives each strategy the same color in every chart.
func strategyColor(name string) color.Color {
	switch name {
	case sim.NoBackoff:
		return color.RGBA{R: 0x88, G: 0x88, B: 0x88, A: 0xff}
	case sim.Exponential:
		return color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	case sim.EqualJitter:
		return color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	case sim.FullJitter:
		return color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	case sim.Decorrelated:
		return color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	case sim.FullQuota:
		return color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}
	case sim.AWSAdaptive:
		return color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}
	case sim.ClientLimiter:
		return color.RGBA{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff}
	case sim.SharedLimiter:
		return color.RGBA{R: 0x17, G: 0x17, B: 0x17, A: 0xff}
	case sim.SharedCUBIC:
		return color.RGBA{R: 0xbc, G: 0xbd, B: 0x22, A: 0xff}
	}
	return color.Black
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = 3 * vg.Millimeter // clear of the Y axis's top label
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.TickerFunc(niceTicks), plot.TickerFunc(niceTicks)
	return p
}

// addLine draws xys on p in color c, marking the points when marks is set.
func addLine(p *plot.Plot, name string, c color.Color, xys plotter.XYs, marks bool) error {
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return fmt.Errorf("plot %s: %w", name, err)
	}
	l.Color, l.Width = c, vg.Points(1.5)
	p.Add(l)
	if marks {
		s.Color, s.Shape, s.Radius = c, draw.CircleGlyph{}, vg.Points(2)
		p.Add(s)
		p.Legend.Add(name, l, s)
		return nil
	}
	p.Legend.Add(name, l)
	return nil
}

// niceTicks marks a linear axis at about six round values (1, 2 or 5 times
// a power of ten apart), labelled without needless decimals.
func niceTicks(lo, hi float64) []plot.Tick {
	raw := (hi - lo) / 6
	if !(raw > 0) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	step := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*step >= raw {
			step *= m
			break
		}
	}
	return ticksEvery(step).Ticks(lo, hi)
}

// ticksEvery marks an axis every step, labelled without needless decimals.
func ticksEvery(step float64) plot.Ticker {
	return plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		var ticks []plot.Tick
		for k := math.Ceil(lo / step); k*step <= hi; k++ {
			v := k * step
			ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 10, 64)})
		}
		return ticks
	})
}

// logY puts p's Y axis on a log scale; every value plotted must be positive.
func logY(p *plot.Plot) {
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		// LogTicks also marks the powers of ten just outside the range, and
		// the plot would shrink its data area to make room for their labels.
		ticks := plot.LogTicks{Prec: -1}.Ticks(lo, hi)
		return slices.DeleteFunc(ticks, func(t plot.Tick) bool { return t.Value < lo || t.Value > hi })
	})
}

// save draws the plots side by side, each w wide and h high, into path; the
// extension (.png or .svg) picks the format.
func save(path string, w, h vg.Length, plots ...*plot.Plot) error {
	width := w * vg.Length(len(plots))
	ext := strings.ToLower(filepath.Ext(path))
	var (
		canvas vg.CanvasSizer
		write  func(*os.File) error
	)
	switch ext {
	case ".png":
		img := vgimg.NewWith(vgimg.UseWH(width, h), vgimg.UseDPI(144))
		canvas = img
		write = func(f *os.File) error { _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); return err }
	case ".svg":
		svg := vgsvg.New(width, h)
		canvas = svg
		write = func(f *os.File) error { _, err := svg.WriteTo(f); return err }
	default:
		return fmt.Errorf("plot: want a .png or .svg file, got %q", path)
	}
	dc := draw.New(canvas)
	// Fill the background: a transparent PNG is unreadable on a dark page.
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2,
		PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	for i, p := range plots {
		p.Draw(tiles.At(dc, i, 0))
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("plot: %w", err)
	}
	return f.Close()
}

func plotOCC(path string, x sim.OCCExperiment, rows []sim.OCCRow) error {
	// Keep axis labels short: gonum shrinks the data area to fit a Y label
	// longer than the axis.
	calls := newPlot(fmt.Sprintf("Writes received by the server (mean of %d runs)", x.Runs), "clients", "writes")
	done := newPlot(fmt.Sprintf("Completion time (mean of %d runs)", x.Runs), "clients", "seconds (log scale)")
	logY(done)
	for s, strat := range x.Strategies {
		cw, ct := make(plotter.XYs, len(x.Clients)), make(plotter.XYs, len(x.Clients))
		for c, n := range x.Clients {
			r := rows[s*len(x.Clients)+c]
			cw[c] = plotter.XY{X: float64(n), Y: r.Calls}
			ct[c] = plotter.XY{X: float64(n), Y: r.Completion.Seconds()}
		}
		col := strategyColor(strat.Name)
		if err := addLine(calls, strat.Name, col, cw, true); err != nil {
			return err
		}
		if err := addLine(done, strat.Name, col, ct, true); err != nil {
			return err
		}
	}
	return save(path, 14*vg.Centimeter, 11*vg.Centimeter, calls, done)
}

func plotOutage(path string, x sim.OutageExperiment, rows []sim.OutageRow) error {
	c := x.Config
	p := newPlot(fmt.Sprintf("Requests/s received in %v bins: %d clients, %v outage, then %d/s admitted", c.Bucket, c.Clients, c.Outage, c.Capacity),
		"time (s)", "requests/s (log scale)")
	logY(p)
	p.Legend.Left, p.Legend.XOffs = false, 0
	bin := c.Bucket.Seconds()
	for _, r := range rows {
		xys := make(plotter.XYs, len(r.LoadRPS))
		for b, v := range r.LoadRPS {
			// A log axis has no zero: an empty bin is drawn at the floor.
			xys[b] = plotter.XY{X: float64(b) * bin, Y: math.Max(v, 1)}
		}
		if err := addLine(p, r.Strategy.Name, strategyColor(r.Strategy.Name), xys, false); err != nil {
			return err
		}
	}
	capLine, err := plotter.NewLine(plotter.XYs{{X: c.Outage.Seconds(), Y: float64(c.Capacity)}, {X: p.X.Max, Y: float64(c.Capacity)}})
	if err != nil {
		return err
	}
	capLine.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(capLine)
	p.Legend.Add("capacity", capLine)
	return save(path, 24*vg.Centimeter, 12*vg.Centimeter, p)
}

func plotAmplification(path string, rows []amplificationRow) error {
	if len(rows) == 0 {
		return nil
	}
	calls := newPlot(fmt.Sprintf("Calls reaching the bottom: %d layers × %d attempts", rows[0].Layers, rows[0].Attempts),
		"bottom failure rate (%, log scale)", "per user request")
	success := newPlot("User requests that succeed", "bottom failure rate (%, log scale)", "%")
	success.Legend.Top = false // the lines start at 100%
	// The rates tried are few and far apart: mark exactly them, on a log
	// scale so that 1% and 10% do not overlap.
	var marks []plot.Tick
	for _, r := range rows {
		if r.Quota == nil && r.FailureRate > 0 {
			v := 100 * r.FailureRate
			marks = append(marks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
		}
	}
	for _, p := range []*plot.Plot{calls, success} {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.ConstantTicks(marks)
	}
	for _, withQuota := range []bool{false, true} {
		var cs, ss plotter.XYs
		for _, r := range rows {
			if (r.Quota != nil) == withQuota && r.FailureRate > 0 {
				cs = append(cs, plotter.XY{X: 100 * r.FailureRate, Y: r.BottomCallsPerRequest})
				ss = append(ss, plotter.XY{X: 100 * r.FailureRate, Y: 100 * r.SuccessRate})
			}
		}
		name, col := "no retry budget", strategyColor(sim.Exponential)
		if withQuota {
			name, col = "retry.Quota per layer", strategyColor(sim.FullJitter)
		}
		if err := addLine(calls, name, col, cs, true); err != nil {
			return err
		}
		if err := addLine(success, name, col, ss, true); err != nil {
			return err
		}
	}
	return save(path, 14*vg.Centimeter, 11*vg.Centimeter, calls, success)
}
