// What the unit tests share about pusher-js: the versions this package claims (installed as npm
// aliases, see package.json), how one is loaded, and a wait for one event with a deadline.

import { readFileSync } from 'node:fs';

import { WAIT_MS } from './fake-herald.mjs';

export const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));

// pusher-js (the newest) and pusher-js-8.N: one alias per minor.
export const VERSIONS = Object.keys(pkg.devDependencies)
  .filter((n) => /^pusher-js(-8\.\d+)?$/.test(n))
  .sort();

/** Imports one pusher-js version, with the harness's workaround for faye's idle close timer. */
export async function loadPusher(mod) {
  const m = (await import(mod)).default;
  // pusher-js 8.5.0's Node build exports {Pusher} instead of the class itself.
  const Pusher = typeof m === 'function' ? m : m.Pusher;
  // pusher-js's bundled faye-websocket arms a 30 s timer when pusher-js closes a socket the
  // server already closed; unref it so the test process does not wait for it.
  const Faye = Pusher.Runtime.getWebSocketAPI();
  if (!Faye.prototype.__heraldPatched) {
    const close = Faye.prototype.close;
    Faye.prototype.close = function patchedClose(...args) {
      const closed = this.readyState === 3;
      const r = close.apply(this, args);
      if (closed && this._closeTimer && this._closeTimer.unref) this._closeTimer.unref();
      return r;
    };
    Faye.prototype.__heraldPatched = true;
  }
  return Pusher;
}

/** Resolves the first emission of event on a pusher-js bindable, within WAIT_MS. */
export function once(target, event) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out after ${WAIT_MS} ms waiting for '${event}'`)), WAIT_MS);
    const cb = (data) => {
      clearTimeout(timer);
      target.unbind(event, cb);
      resolve(data);
    };
    target.bind(event, cb);
  });
}
