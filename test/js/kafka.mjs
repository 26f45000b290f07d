// A real Kafka broker for the suite, started exactly as the Go tests start theirs: this runs
// internal/servicetest/cmd/kafkabroker (built once per process with `go build`, or
// $HERALD_KAFKABROKER_BIN), which starts servicetest.StartKafka's broker (KRaft mode, Kafka's
// jars from Maven Central, fetched with Maven into ~/.cache/herald-kafka on first use), prints
// its address and keeps it up until its standard input closes. So the broker goes away with
// this process however this process ends, and with its pid-stopped helper.

import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { REPO_ROOT, WAIT_MS, withDeadline } from './harness.mjs';

/**
 * The deadline for the broker's start: the first run fetches the jars with Maven (about 15 s
 * on a good day, more on a busy machine); a cached start takes 2-3 s.
 */
export const KAFKA_START_MS = Number(process.env.HERALD_KAFKA_START_MS) || 170_000;

/** The helper's exit status when java is not installed (the caller may skip). */
export const EXIT_NO_JAVA = 3;

let builtBin = null;
let buildDir = null;
process.on('exit', () => {
  if (buildDir) rmSync(buildDir, { recursive: true, force: true });
});

function brokerBinary() {
  if (process.env.HERALD_KAFKABROKER_BIN) return process.env.HERALD_KAFKABROKER_BIN;
  if (builtBin) return builtBin;
  buildDir = mkdtempSync(path.join(os.tmpdir(), 'herald-js-kafkabroker-'));
  const out = path.join(buildDir, 'kafkabroker');
  try {
    execFileSync('go', ['build', '-o', out, './internal/servicetest/cmd/kafkabroker'], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 300_000,
    });
  } catch (e) {
    throw new Error(`go build ./internal/servicetest/cmd/kafkabroker failed:\n${e.stderr ? e.stderr.toString() : e.message}`);
  }
  builtBin = out;
  return out;
}

/** One single-node Kafka broker on 127.0.0.1 (broker and controller in one JVM). */
export class KafkaBroker {
  constructor() {
    this.addr = null;
    this.proc = null;
    this.output = '';
    this.exitInfo = null;
    this.exited = null;
  }

  /**
   * Starts the broker and resolves once it answers (the helper prints its address only then).
   * Rejects with err.noJava set when java is not installed.
   */
  async start() {
    const proc = spawn(brokerBinary(), [], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.proc = proc;
    proc.stderr.on('data', (d) => {
      this.output += d.toString();
    });
    this.exited = new Promise((resolve) => {
      proc.on('exit', (code, signal) => {
        this.exitInfo = { code, signal };
        resolve(this.exitInfo);
      });
    });
    const addr = new Promise((resolve, reject) => {
      let line = '';
      proc.stdout.on('data', (d) => {
        line += d.toString();
        const nl = line.indexOf('\n');
        if (nl >= 0) resolve(JSON.parse(line.slice(0, nl)).addr);
      });
      this.exited.then(({ code, signal }) => {
        const e = new Error(
          code === EXIT_NO_JAVA
            ? this.output.trim()
            : `kafkabroker exited (code ${code}, signal ${signal}) before the broker answered:\n${this.output}`,
        );
        e.noJava = code === EXIT_NO_JAVA;
        reject(e);
      });
    });
    try {
      this.addr = await withDeadline(addr, KAFKA_START_MS, () => `the Kafka broker to answer (kafkabroker said: ${this.output})`);
    } catch (e) {
      await this.stop();
      throw e;
    }
    return this;
  }

  /**
   * Closes the helper's standard input, on which it kills the broker (exactly the JVM it
   * started) and removes its files; SIGKILL to the helper's pid if it has not exited by then.
   */
  async stop() {
    if (!this.proc || this.exitInfo) return this.exitInfo;
    this.proc.stdin.end();
    try {
      return await withDeadline(this.exited, WAIT_MS, `kafkabroker (pid ${this.proc.pid}) to exit`);
    } catch {
      this.proc.kill('SIGKILL');
      return this.exited;
    }
  }
}
