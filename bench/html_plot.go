package bench

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// A plot is one inline SVG line chart of the HTML report: seconds since the start on x, one
// unit on y, one or more series sharing both axes.
type plot struct {
	id     string // the svg's data-plot attribute
	title  string
	yLabel string  // the y axis's label, with its unit
	unit   string  // the unit after a value in a tooltip ("ms"); may be empty
	xTop   float64 // right end of the x axis, in seconds; shared by the report's plots
	series []series
}

// series is one line. A NaN y is a second without a value (no event arrived): the line breaks
// there instead of dropping to zero.
type series struct {
	id    string // the polylines' data-series attribute
	name  string // legend text
	color string
	dash  bool
	x, y  []float64
}

// Plot geometry in SVG user units: the drawing area is 800 × 200 inside margins that hold the
// legend (top), tick labels (left) and the x axis's label (bottom).
const (
	plotW      = 880
	plotH      = 280
	plotLeft   = 64
	plotRight  = 16
	plotTop    = 36
	plotBottom = 44
	// plotMarkers is the most points a series may have and still get a dot (with a tooltip) per
	// point; beyond it the dots would merge into a smear.
	plotMarkers = 120
	plotTicks   = 6 // most steps on an axis
)

// niceAxis returns the top of an axis starting at zero that holds max, and its tick step: the
// smallest of 1, 2 or 5 times a power of ten that needs at most plotTicks steps.
func niceAxis(max float64) (top, step float64) {
	if !(max > 0) || math.IsInf(max, 0) {
		return 1, 0.2
	}
	exp := math.Pow(10, math.Floor(math.Log10(max/plotTicks)))
	for _, m := range []float64{1, 2, 5, 10, 20} {
		step = m * exp
		if n := math.Ceil(max/step - 1e-9); n <= plotTicks {
			return n * step, step
		}
	}
	return max, max // not reached: 10 × exp > max / plotTicks
}

// plotX and plotY map data to SVG coordinates.
func plotX(x, top float64) float64 {
	return plotLeft + x/top*(plotW-plotLeft-plotRight)
}

func plotY(y, top float64) float64 {
	return plotH - plotBottom - y/top*(plotH-plotTop-plotBottom)
}

// coord formats an SVG coordinate to a tenth of a unit.
func coord(v float64) string {
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
}

// tickLabel formats a tick value; thousands become "k" and millions "M".
func tickLabel(v, step float64) string {
	switch {
	case v == 0:
		return "0"
	case step >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case step >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	decimals := 0
	for s := step; s < 1 && decimals < 6; s *= 10 {
		decimals++
	}
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

// writeSVG draws the plot.
func (p plot) writeSVG(b *strings.Builder) {
	ymax := 0.0
	for _, s := range p.series {
		for _, y := range s.y {
			if !math.IsNaN(y) && y > ymax {
				ymax = y
			}
		}
	}
	yTop, yStep := niceAxis(ymax)
	xTop, xStep := niceAxis(p.xTop)
	esc := html.EscapeString
	fmt.Fprintf(b, `<svg class="plot" data-plot="%s" viewBox="0 0 %d %d" role="img" aria-label="%s">`+"\n", esc(p.id), plotW, plotH, esc(p.title))
	fmt.Fprintf(b, "<title>%s</title>\n", esc(p.title))

	// Grid, ticks and axes.
	b.WriteString(`<g class="axis">` + "\n")
	for v := 0.0; v <= yTop+yStep/2; v += yStep {
		y := coord(plotY(v, yTop))
		fmt.Fprintf(b, `<line class="grid" x1="%d" x2="%d" y1="%s" y2="%s"/>`, plotLeft, plotW-plotRight, y, y)
		fmt.Fprintf(b, `<text x="%d" y="%s" text-anchor="end" dy="0.32em">%s</text>`+"\n", plotLeft-6, y, esc(tickLabel(v, yStep)))
	}
	for v := 0.0; v <= xTop+xStep/2; v += xStep {
		x := coord(plotX(v, xTop))
		fmt.Fprintf(b, `<line class="tick" x1="%s" x2="%s" y1="%d" y2="%d"/>`, x, x, plotH-plotBottom, plotH-plotBottom+5)
		fmt.Fprintf(b, `<text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", x, plotH-plotBottom+18, esc(tickLabel(v, xStep)))
	}
	fmt.Fprintf(b, `<line class="frame" x1="%d" x2="%d" y1="%d" y2="%d"/>`, plotLeft, plotW-plotRight, plotH-plotBottom, plotH-plotBottom)
	fmt.Fprintf(b, `<line class="frame" x1="%d" x2="%d" y1="%d" y2="%d"/>`+"\n", plotLeft, plotLeft, plotTop, plotH-plotBottom)
	fmt.Fprintf(b, `<text class="label" x="%d" y="%d" text-anchor="middle">seconds since start</text>`+"\n", (plotLeft+plotW-plotRight)/2, plotH-6)
	fmt.Fprintf(b, `<text class="label" transform="translate(14 %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (plotTop+plotH-plotBottom)/2, esc(p.yLabel))
	b.WriteString("</g>\n")

	// Legend, left to right above the drawing area.
	b.WriteString(`<g class="legend">`)
	lx := plotLeft
	for _, s := range p.series {
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="14" y2="14" stroke="%s" stroke-width="2.5"%s/>`, lx, lx+18, s.color, dashAttr(s.dash))
		fmt.Fprintf(b, `<text x="%d" y="14" dy="0.32em">%s</text>`, lx+24, esc(s.name))
		lx += 24 + 7*len(s.name) + 22
	}
	b.WriteString("</g>\n")

	for _, s := range p.series {
		s.writeSVG(b, xTop, yTop, p.unit)
	}
	b.WriteString("</svg>\n")
}

func dashAttr(dash bool) string {
	if dash {
		return ` stroke-dasharray="5 3"`
	}
	return ""
}

// writeSVG draws one series: a polyline per run of points with values, and a dot per point
// (with its value as a tooltip) when there are few enough.
func (s series) writeSVG(b *strings.Builder, xTop, yTop float64, unit string) {
	fmt.Fprintf(b, `<g class="series" data-series="%s">`+"\n", html.EscapeString(s.id))
	n := 0
	for _, y := range s.y {
		if !math.IsNaN(y) {
			n++
		}
	}
	var seg []string
	flush := func() {
		if len(seg) > 0 {
			fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.8" stroke-linejoin="round"%s points="%s"/>`+"\n",
				s.color, dashAttr(s.dash), strings.Join(seg, " "))
		}
		seg = seg[:0]
	}
	for i, y := range s.y {
		if math.IsNaN(y) {
			flush()
			continue
		}
		seg = append(seg, coord(plotX(s.x[i], xTop))+","+coord(plotY(y, yTop)))
	}
	flush()
	if n <= plotMarkers {
		for i, y := range s.y {
			if math.IsNaN(y) {
				continue
			}
			fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="2.5" fill="%s"><title>%s at %s s: %s</title></circle>`+"\n",
				coord(plotX(s.x[i], xTop)), coord(plotY(y, yTop)), s.color, html.EscapeString(s.name),
				strconv.FormatFloat(math.Round(s.x[i]*10)/10, 'f', -1, 64), html.EscapeString(strings.TrimSpace(fmtValue(y)+" "+unit)))
		}
	}
	b.WriteString("</g>\n")
}

// fmtValue formats a plotted value for a tooltip or table: integers as they are, fractions to
// three decimals at most.
func fmtValue(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}
