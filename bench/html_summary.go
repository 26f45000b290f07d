package bench

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// summaryMaxRows bounds the rows of one table; the JSON output has them all.
const summaryMaxRows = 1000

// summarySkip are members the report shows elsewhere: the timeline is plotted.
var summarySkip = map[string]bool{"timeline": true}

// writeSummary renders a report's JSON document as tables, whatever the scenario: the
// top-level scalars in one card, each object member in a card of its own (nested objects
// flattened to dotted names), and each array of objects as a table with a row per element.
func writeSummary(b *strings.Builder, root *jsonValue) {
	if root.kind != 'o' {
		b.WriteString(`<div class="cards">`)
		writeCard(b, "report", []string{"value"}, []*jsonValue{root})
		b.WriteString("</div>\n")
		return
	}
	var keys []string
	var vals []*jsonValue
	var cards, tables []int
	for i, k := range root.keys {
		v := root.vals[i]
		switch {
		case summarySkip[k]:
		case v.kind == 'o':
			cards = append(cards, i)
		case v.objects():
			tables = append(tables, i)
		default:
			keys, vals = append(keys, k), append(vals, v)
		}
	}
	b.WriteString(`<div class="cards">` + "\n")
	if len(keys) > 0 {
		writeCard(b, "run", keys, vals)
	}
	var nested []namedTable // arrays of objects found inside cards
	for _, i := range cards {
		var ks []string
		var vs []*jsonValue
		flatten(root.keys[i], root.vals[i], "", &ks, &vs, &nested)
		writeCard(b, root.keys[i], ks, vs)
	}
	b.WriteString("</div>\n")
	for _, i := range tables {
		writeTable(b, root.keys[i], root.vals[i])
	}
	for _, n := range nested {
		writeTable(b, n.title, n.v)
	}
}

// namedTable is an array of objects found inside an object, titled by its dotted path.
type namedTable struct {
	title string
	v     *jsonValue
}

// flatten lists an object's members under dotted names; arrays of objects are set aside in
// nested to become tables of their own, titled path.name.
func flatten(path string, v *jsonValue, prefix string, keys *[]string, vals *[]*jsonValue, nested *[]namedTable) {
	for i, k := range v.keys {
		e := v.vals[i]
		switch {
		case e.kind == 'o' && len(e.keys) > 0:
			flatten(path+"."+k, e, prefix+k+".", keys, vals, nested)
		case e.objects():
			*nested = append(*nested, namedTable{path + "." + k, e})
		default:
			*keys, *vals = append(*keys, prefix+k), append(*vals, e)
		}
	}
}

// writeCard writes a two-column table of names and values.
func writeCard(b *strings.Builder, title string, keys []string, vals []*jsonValue) {
	fmt.Fprintf(b, `<div class="card" data-card="%s"><h3>%s</h3><table class="kv">`+"\n", html.EscapeString(title), html.EscapeString(title))
	for i, k := range keys {
		fmt.Fprintf(b, `<tr><th>%s</th><td>`, html.EscapeString(k))
		writeCell(b, k, vals[i])
		b.WriteString("</td></tr>\n")
	}
	b.WriteString("</table></div>\n")
}

// writeTable writes an array of objects as a table: a column per (flattened) member name, in
// the order first seen.
func writeTable(b *strings.Builder, title string, arr *jsonValue) {
	var cols []string
	seen := map[string]bool{}
	rows := make([]map[string]*jsonValue, 0, len(arr.vals))
	for _, e := range arr.vals {
		var ks []string
		var vs []*jsonValue
		var nested []namedTable
		flatten("", e, "", &ks, &vs, &nested)
		for _, n := range nested { // an array of objects inside a row: only its length fits
			ks = append(ks, n.title[1:])
			vs = append(vs, &jsonValue{kind: 's', text: strconv.Itoa(len(n.v.vals)) + " items"})
		}
		row := make(map[string]*jsonValue, len(ks))
		for i, k := range ks {
			if !seen[k] {
				seen[k] = true
				cols = append(cols, k)
			}
			row[k] = vs[i]
		}
		rows = append(rows, row)
	}
	fmt.Fprintf(b, `<div class="wide" data-table="%s"><h3>%s</h3><table class="rows"><thead>`, html.EscapeString(title), html.EscapeString(title))
	writeTableHead(b, cols)
	b.WriteString("<tbody>\n")
	for i, row := range rows {
		if i == summaryMaxRows {
			fmt.Fprintf(b, `<tr><td colspan="%d">… %d more rows in the JSON output (--json)</td></tr>`+"\n", len(cols), len(rows)-i)
			break
		}
		b.WriteString("<tr>")
		for _, c := range cols {
			b.WriteString("<td>")
			if v := row[c]; v != nil {
				writeCell(b, c, v)
			}
			b.WriteString("</td>")
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody></table></div>\n")
}

// writeTableHead writes the column names. Columns flattened from one object ("latency.p50_ms",
// "latency.p99_ms") get a group heading ("latency") over their own names ("p50_ms", "p99_ms").
func writeTableHead(b *strings.Builder, cols []string) {
	group := func(c string) string {
		g, _, ok := strings.Cut(c, ".")
		if !ok {
			return ""
		}
		return g
	}
	grouped := false
	for _, c := range cols {
		grouped = grouped || group(c) != ""
	}
	if grouped {
		b.WriteString(`<tr class="group">`)
		for i := 0; i < len(cols); {
			g, n := group(cols[i]), 1
			for i+n < len(cols) && g != "" && group(cols[i+n]) == g {
				n++
			}
			fmt.Fprintf(b, `<th colspan="%d">%s</th>`, n, html.EscapeString(g))
			i += n
		}
		b.WriteString("</tr>")
	}
	b.WriteString("<tr>")
	for _, c := range cols {
		if g := group(c); g != "" {
			c = c[len(g)+1:]
		}
		fmt.Fprintf(b, `<th title="%s">%s</th>`, html.EscapeString(c), html.EscapeString(c))
	}
	b.WriteString("</tr></thead>\n")
}

// writeCell writes one value. Numbers keep their JSON literal when whole and are rounded to
// three decimals otherwise; a member named *_bytes also shows KiB, MiB or GiB.
func writeCell(b *strings.Builder, key string, v *jsonValue) {
	switch v.kind {
	case 'n':
		b.WriteString(html.EscapeString(fmtNumber(v.text)))
		if strings.HasSuffix(key, "_bytes") {
			if f, err := strconv.ParseFloat(v.text, 64); err == nil && math.Abs(f) >= 1024 {
				fmt.Fprintf(b, ` <span class="unit">%s</span>`, fmtBytes(f))
			}
		}
	case 's':
		b.WriteString(html.EscapeString(v.text))
	case 'b':
		fmt.Fprintf(b, `<span class="%s">%s</span>`, v.text, v.text)
	case 'z':
		b.WriteString(`<span class="none">–</span>`)
	case 'a':
		if len(v.vals) == 0 {
			b.WriteString(`<span class="none">none</span>`)
			return
		}
		for i, e := range v.vals {
			if i > 0 {
				b.WriteString(", ")
			}
			if e.scalar() {
				writeCell(b, key, e)
			} else {
				b.WriteString(html.EscapeString(compactJSON(e)))
			}
		}
	case 'o':
		b.WriteString(html.EscapeString(compactJSON(v)))
	}
}

// fmtNumber shortens a JSON number literal for reading: whole numbers as they are, fractions
// to three decimals (four significant digits under 1).
func fmtNumber(lit string) string {
	if !strings.ContainsAny(lit, ".eE") {
		return lit
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return lit
	}
	if math.Abs(f) < 1 {
		return strconv.FormatFloat(f, 'g', 4, 64)
	}
	return strconv.FormatFloat(math.Round(f*1000)/1000, 'f', -1, 64)
}

// fmtBytes writes a byte count in the largest binary unit under it.
func fmtBytes(n float64) string {
	switch a := math.Abs(n); {
	case a >= 1<<30:
		return fmt.Sprintf("%.2f GiB", n/(1<<30))
	case a >= 1<<20:
		return fmt.Sprintf("%.1f MiB", n/(1<<20))
	default:
		return fmt.Sprintf("%.1f KiB", n/(1<<10))
	}
}
