// A real PostgreSQL for the suite, started exactly as the Go tests start theirs: this runs
// internal/servicetest/cmd/postgres (built once per process with `go build`), which starts
// servicetest.StartPostgres's server (Debian's postgresql on a free loopback port, in a
// temporary directory), prints its URL and keeps it up until its standard input closes. So the
// server goes away with this process however this process ends.

import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { REPO_ROOT, WAIT_MS, withDeadline } from './harness.mjs';

let built = null;
let buildDir = null;
process.on('exit', () => {
  if (buildDir) rmSync(buildDir, { recursive: true, force: true });
});

function helperBinary() {
  if (built) return built;
  buildDir = mkdtempSync(path.join(os.tmpdir(), 'herald-js-postgres-'));
  const out = path.join(buildDir, 'postgres');
  try {
    execFileSync('go', ['build', '-o', out, './internal/servicetest/cmd/postgres'], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 300_000,
    });
  } catch (e) {
    throw new Error(`go build ./internal/servicetest/cmd/postgres failed:\n${e.stderr ? e.stderr.toString() : e.message}`);
  }
  built = out;
  return out;
}

/**
 * One PostgreSQL server with a database "herald"; url is its postgres:// URL. With
 * soketiTable, the database has Soketi's (empty) apps table; with historyColumn too, the table
 * has herald's history column (docs/app-stores.md).
 */
export class Postgres {
  constructor({ soketiTable = false, historyColumn = false } = {}) {
    this.args = soketiTable ? ['-soketi-table'] : [];
    if (soketiTable && historyColumn) this.args.push('-history-column');
  }

  async start() {
    const proc = spawn(helperBinary(), this.args, { stdio: ['pipe', 'pipe', 'pipe'] });
    this.proc = proc;
    this.output = '';
    proc.stderr.on('data', (d) => {
      this.output += d.toString();
    });
    this.exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
    const url = new Promise((resolve, reject) => {
      let line = '';
      proc.stdout.on('data', (d) => {
        line += d.toString();
        const nl = line.indexOf('\n');
        if (nl >= 0) resolve(JSON.parse(line.slice(0, nl)).url);
      });
      this.exited.then(({ code }) => reject(new Error(`the postgres helper exited (${code}) before the server answered:\n${this.output}`)));
    });
    this.url = await withDeadline(url, WAIT_MS * 3, () => `PostgreSQL to answer (helper said: ${this.output})`);
    return this;
  }

  /** Closes the helper's standard input: it stops the server by its pid and removes its files. */
  async stop() {
    if (!this.proc) return;
    this.proc.stdin.end();
    try {
      await withDeadline(this.exited, WAIT_MS, 'the postgres helper to exit');
    } catch {
      this.proc.kill('SIGKILL');
      await this.exited;
    }
  }
}
