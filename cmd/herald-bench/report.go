package main

import (
	"encoding/json"
	"io"

	"github.com/herald-rt/herald/bench"
	"github.com/herald-rt/herald/internal/buildinfo"
)

// writeHTML writes the HTML report with --report: the run's report or why it failed.
func (j *benchJob) writeHTML(monitor *bench.Monitor, rep benchReport, runErr error) error {
	if j.htmlPath == "" {
		return nil
	}
	page := monitor.HTMLReport(rep, runErr)
	page.Command, page.Version = append([]string{"herald-bench", j.scenario}, j.args...), buildinfo.Version(version)
	return bench.WriteHTMLFile(j.htmlPath, page)
}

// writeReport writes the report to w, as text or with --json as one JSON document, with the
// server's metrics when they were read.
func (j *benchJob) writeReport(w io.Writer, rep benchReport, server *bench.ServerSamples) error {
	if !j.asJSON {
		err := rep.WriteText(w)
		if err == nil && server != nil {
			err = server.WriteText(w)
		}
		return err
	}
	var doc any = rep
	if server != nil {
		var err error
		if doc, err = bench.WithServerMetrics(rep, server); err != nil { // the report's members and "server_metrics"
			return err
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
