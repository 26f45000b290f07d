// A rolling upgrade on NATS: two nodes of the previous release (v0.1.0, commit 890a037) and a
// new one, the old replaced one by one; see upgrade.mjs.

import { test, afterEach } from 'node:test';

import { cleanupAll } from '../harness.mjs';
import { rollingUpgrade } from '../upgrade.mjs';

afterEach(() => cleanupAll());

test('v0.1.0 nodes replaced one by one: no event lost, presence agreed, bundles only once no old node is left', async (t) => {
  await rollingUpgrade('nats', t);
});
