// A headless Chromium (Debian's `chromium`, never a downloaded browser) driven over the Chrome
// DevTools Protocol with the `ws` package: enough to load a page, read and click it, and take
// screenshots. One browser per call to launchChromium; close() kills it by its pid and
// removes its profile.

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import WebSocket from 'ws';

import { WAIT_MS, eventually, withDeadline } from './harness.mjs';

// Browsers started here and not closed yet: killed (their process groups, by the pids this
// module started) if the test file exits without closing them.
const live = new Set();
process.on('exit', () => {
  for (const p of live) killGroup(p);
});

function killGroup(proc) {
  try {
    process.kill(-proc.pid, 'SIGKILL');
  } catch {
    try {
      proc.kill('SIGKILL');
    } catch {}
  }
}

/** The chromium binary: $CHROMIUM_BIN, else Debian's. */
export function chromiumBinary() {
  if (process.env.CHROMIUM_BIN) return process.env.CHROMIUM_BIN;
  for (const p of ['/usr/bin/chromium', '/usr/bin/chromium-browser']) if (existsSync(p)) return p;
  throw new Error('chromium not found: apt-get install -y chromium (or set CHROMIUM_BIN)');
}

/**
 * Starts headless Chromium with a window of width × height and connects to its first page.
 * The DevTools port is chosen by Chromium (port 0) and read from its stderr.
 */
export async function launchChromium({ width = 1280, height = 900 } = {}) {
  const profile = mkdtempSync(path.join(os.tmpdir(), 'herald-chromium-'));
  const proc = spawn(
    chromiumBinary(),
    [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-extensions',
      '--no-first-run',
      '--remote-debugging-address=127.0.0.1',
      '--remote-debugging-port=0',
      `--user-data-dir=${profile}`,
      `--window-size=${width},${height}`,
      'about:blank',
    ],
    // Its own process group: its zygote and renderers inherit stderr, and close() kills them
    // with it, so no child keeps the pipe (and this process) alive.
    { stdio: ['ignore', 'ignore', 'pipe'], detached: true },
  );
  live.add(proc);
  let stderr = '';
  const exited = new Promise((resolve) => proc.on('exit', resolve));
  const browserUrl = await withDeadline(
    new Promise((resolve, reject) => {
      proc.stderr.on('data', (chunk) => {
        stderr += chunk.toString();
        const m = stderr.match(/DevTools listening on (ws:\/\/\S+)/);
        if (m) resolve(m[1]);
      });
      proc.on('exit', (code) => reject(new Error(`chromium exited (${code}) before listening:\n${stderr}`)));
    }),
    WAIT_MS,
    () => `chromium's DevTools address (stderr: ${stderr.slice(-2000)})`,
  );
  const http = browserUrl.replace(/^ws:\/\/([^/]+)\/.*$/, 'http://$1');
  const target = await eventually(
    async () => {
      const list = await (await fetch(`${http}/json/list`)).json();
      return list.find((t) => t.type === 'page');
    },
    WAIT_MS,
    'a page target',
  );
  const page = new Page(target.webSocketDebuggerUrl);
  await page.open();
  await page.send('Page.enable');
  await page.send('Runtime.enable');
  await page.send('Emulation.setDeviceMetricsOverride', { width, height, deviceScaleFactor: 1, mobile: false });
  page.close = async () => {
    page.ws.close();
    killGroup(proc);
    await exited;
    proc.stderr.destroy();
    live.delete(proc);
    rmSync(profile, { recursive: true, force: true });
  };
  page.stderr = () => stderr;
  return page;
}

/** One page target, spoken to over its DevTools WebSocket. */
class Page {
  constructor(url) {
    this.url = url;
    this.nextId = 1;
    this.pending = new Map();
    this.consoleLines = [];
  }

  open() {
    this.ws = new WebSocket(this.url, { perMessageDeflate: false });
    this.ws.on('message', (buf) => {
      const msg = JSON.parse(buf.toString());
      if (msg.id && this.pending.has(msg.id)) {
        const { resolve, reject } = this.pending.get(msg.id);
        this.pending.delete(msg.id);
        if (msg.error) reject(new Error(`CDP: ${msg.error.message}`));
        else resolve(msg.result);
      } else if (msg.method === 'Runtime.consoleAPICalled') {
        this.consoleLines.push(msg.params.args.map((a) => a.value ?? a.description).join(' '));
      } else if (msg.method === 'Runtime.exceptionThrown') {
        this.consoleLines.push('exception: ' + JSON.stringify(msg.params.exceptionDetails));
      }
    });
    return new Promise((resolve, reject) => {
      this.ws.once('open', resolve);
      this.ws.once('error', reject);
    });
  }

  send(method, params = {}) {
    const id = this.nextId++;
    this.ws.send(JSON.stringify({ id, method, params }));
    return withDeadline(
      new Promise((resolve, reject) => this.pending.set(id, { resolve, reject })),
      WAIT_MS,
      `CDP ${method}`,
    );
  }

  /** Evaluates a JavaScript expression in the page and returns its value (awaiting promises). */
  async evaluate(expression) {
    const r = await this.send('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true });
    if (r.exceptionDetails) throw new Error(`page: ${expression}: ${JSON.stringify(r.exceptionDetails)}`);
    return r.result.value;
  }

  /** Navigates and waits until the document at the final URL (after redirects) has loaded. */
  async goto(url) {
    await this.send('Page.navigate', { url });
    await eventually(
      () => this.evaluate(`document.readyState === 'complete' && location.href !== 'about:blank'`),
      WAIT_MS,
      `${url} to load`,
    );
  }

  /** Polls a page expression until it is truthy; the failure names what and the page's logs. */
  waitFor(expression, what = expression, ms = WAIT_MS) {
    return eventually(() => this.evaluate(expression), ms, () => `${what} (page console: ${this.consoleLines.slice(-5).join(' | ')})`);
  }

  /** Saves a PNG of the viewport (or the full page) to file. */
  async screenshot(file, { fullPage = false } = {}) {
    const params = { format: 'png' };
    if (fullPage) {
      const { cssContentSize } = await this.send('Page.getLayoutMetrics');
      params.clip = { x: 0, y: 0, width: cssContentSize.width, height: cssContentSize.height, scale: 1 };
      params.captureBeyondViewport = true;
    }
    const { data } = await this.send('Page.captureScreenshot', params);
    writeFileSync(file, Buffer.from(data, 'base64'));
  }
}
