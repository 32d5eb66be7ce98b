package main

import (
	"fmt"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// tileW and tileH are the size of one plot in a PNG.
const (
	tileW = 14 * vg.Centimeter
	tileH = 9 * vg.Centimeter
)

// savePNG draws plots side by side, one tile each, into a PNG at path.
func savePNG(path string, plots ...*plot.Plot) error {
	img := vgimg.NewWith(vgimg.UseWH(tileW*vg.Length(len(plots)), tileH), vgimg.UseDPI(110))
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Centimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	dc := draw.New(img)
	for i, p := range plots {
		p.Draw(tiles.At(dc, i, 0))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// plotThroughput draws each implementation's single-node throughput,
// serial and parallel bars side by side.
func plotThroughput(path string, r results) error {
	p := plot.New()
	p.Title.Text = "Acquire+release throughput, one redis-server"
	p.Y.Label.Text = "thousand ops/s"
	w := vg.Points(14)
	top := 0.0
	for i, mode := range []string{"serial", "parallel"} {
		vs := make(plotter.Values, len(impls))
		for j, im := range impls {
			v, _ := r.opsPerSec(single + im + "/" + mode)
			vs[j] = v / 1e3
			top = math.Max(top, vs[j])
		}
		bars, err := plotter.NewBarChart(vs, w)
		if err != nil {
			return err
		}
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Width = 0
		bars.Offset = w * vg.Length(2*i-1) / 2
		p.Add(bars)
		p.Legend.Add(mode, bars)
	}
	p.Legend.Top = true
	p.NominalX(impls...)
	p.Y.Min, p.Y.Max = 0, 1.25*top // room for the legend
	return savePNG(path, p)
}

// plotRedlock draws Redlock's µs/op against the number of nodes, one line
// per implementation and mode.
func plotRedlock(path string, r results) error {
	p := plot.New()
	p.Title.Text = "Redlock acquire+release latency"
	p.X.Label.Text = "independent redis-servers"
	p.Y.Label.Text = "µs/op"
	var lines []any
	for _, mode := range []string{"serial", "parallel"} {
		for _, im := range redlockImpls {
			var xys plotter.XYs
			for _, n := range r.redlockNodes() {
				if v, ok := r.get(redlock(n)+im+"/"+mode, ns); ok {
					xys = append(xys, plotter.XY{X: float64(n), Y: v / 1e3})
				}
			}
			if len(xys) > 0 {
				lines = append(lines, im+" "+mode, xys)
			}
		}
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return err
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.X.Tick.Marker = nodeTicks(r.redlockNodes())
	p.Y.Min = 0
	return savePNG(path, p)
}

// nodeTicks marks exactly the node counts measured.
func nodeTicks(nodes []int) plot.ConstantTicks {
	ts := make(plot.ConstantTicks, len(nodes))
	for i, n := range nodes {
		ts[i] = plot.Tick{Value: float64(n), Label: fmt.Sprint(n)}
	}
	return ts
}

// plotFailover draws the crash and graceful handover times of each method
// as box plots with every trial as a dot; the graceful panel has a log
// scale, since the two methods differ by orders of magnitude there.
func plotFailover(path string, f failover) error {
	crash, err := failoverPanel("Crash (SIGKILL the leader)", f, func(m failoverMethod) []float64 { return m.CrashSeconds })
	if err != nil {
		return err
	}
	graceful, err := failoverPanel("Graceful (SIGTERM the leader)", f, func(m failoverMethod) []float64 { return m.GracefulSeconds })
	if err != nil {
		return err
	}
	crash.Y.Min = 0
	graceful.Y.Scale = plot.LogScale{}
	graceful.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	return savePNG(path, crash, graceful)
}

// failoverPanel is one box plot per method of the times of.
func failoverPanel(title string, f failover, of func(failoverMethod) []float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "seconds until the next leader leads"
	var names []string
	for i, m := range f.Methods {
		vs := plotter.Values(of(m))
		if len(vs) == 0 {
			continue
		}
		for j := range vs {
			vs[j] = math.Max(vs[j], 1e-3) // a log scale needs > 0
		}
		box, err := plotter.NewBoxPlot(vg.Points(28), float64(i), vs)
		if err != nil {
			return nil, err
		}
		box.FillColor = plotutil.Color(i)
		dots := make(plotter.XYs, len(vs))
		for j, v := range vs {
			// Spread the dots across the box, in trial order.
			dots[j] = plotter.XY{X: float64(i) - 0.06 + 0.12*float64(j)/float64(max(1, len(vs)-1)), Y: v}
		}
		sc, err := plotter.NewScatter(dots)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle.Radius = vg.Points(1.5)
		p.Add(box, sc)
		names = append(names, methodLabel(m.Method))
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(f.Methods))-0.5
	return p, nil
}

// plotAPIWrites draws each method's election writes to the API server per
// minute, labelled with their values.
func plotAPIWrites(path string, f failover) error {
	var names []string
	var vs plotter.Values
	for _, m := range f.Methods {
		names = append(names, methodLabel(m.Method))
		vs = append(vs, m.APIWritesPerMinute)
	}
	p, err := methodBars("Election writes to the API server, idle", "writes/min", names, vs, func(v float64) string { return fmt.Sprintf("%.1f", v) })
	if err != nil {
		return err
	}
	return savePNG(path, p)
}

// plotOutage draws, per method, the time with no leader through the
// API-server outage and the time from the API server's return to the
// first reconcile, labelled with their values.
func plotOutage(path string, o outage) error {
	var names []string
	var none, first plotter.Values
	for _, m := range o.Methods {
		names = append(names, methodLabel(m.Method))
		none = append(none, m.NoLeaderSeconds)
		first = append(first, m.FirstReconcileSeconds)
	}
	noLeader, err := methodBars(fmt.Sprintf("Time with no leader, API server stopped %s", o.Outage), "seconds", names, none, seconds)
	if err != nil {
		return err
	}
	reconcile, err := methodBars("API server back to the first reconcile", "seconds", names, first, seconds)
	if err != nil {
		return err
	}
	return savePNG(path, noLeader, reconcile)
}

// methodBars is one bar per method (names), each labelled with its value
// as label formats it; the Y axis starts at 0 and reaches at least 1.
func methodBars(title, yLabel string, names []string, vs plotter.Values, label func(float64) string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = yLabel
	top := 1.0
	labels := plotter.XYLabels{}
	for i, v := range vs {
		top = math.Max(top, v)
		labels.XYs = append(labels.XYs, plotter.XY{X: float64(i), Y: v})
		labels.Labels = append(labels.Labels, label(v))
	}
	bars, err := plotter.NewBarChart(vs, vg.Points(40))
	if err != nil {
		return nil, err
	}
	bars.Color = plotutil.Color(0)
	l, err := plotter.NewLabels(labels)
	if err != nil {
		return nil, err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign = draw.XCenter
	}
	l.Offset = vg.Point{Y: vg.Points(3)}
	p.Add(bars, l)
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(vs))-0.5
	p.Y.Min, p.Y.Max = 0, 1.2*top
	return p, nil
}
