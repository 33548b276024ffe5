// A third-party WHIP client (whip-whep from npm) in Debian's Chromium,
// on a page of another origin, against holdline serve's WHIP endpoint:
//
//   node whip.mjs PAGE_URL ENDPOINT TOKEN CALLER.wav
//
// It publishes the fake microphone (the WAV, looping) with sendrecv,
// waits for the connection and the agent's audio, lets the caller speak,
// then stops (DELETE). It prints what it saw as JSON; the Go test reads
// the session's context and list from the server.
import { chromium } from 'playwright-core';

const [pageURL, endpoint, token, wav] = process.argv.slice(2);
const t0 = Date.now();
const log = (...a) => console.error(`[${((Date.now() - t0) / 1000).toFixed(1)}s]`, ...a);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    '--allow-loopback-in-peer-connection', '--use-fake-ui-for-media-stream',
    '--use-fake-device-for-media-stream', `--use-file-for-fake-audio-capture=${wav}`,
    '--autoplay-policy=no-user-gesture-required',
  ],
});
const result = { ok: false, requests: [] };
try {
  const page = await browser.newPage();
  page.on('console', (m) => log('page:', m.text()));
  page.on('pageerror', (e) => log('page exception:', e.message));
  // Every request the client makes to the server, with its answer.
  page.on('response', (r) => {
    if (r.url().startsWith(endpoint.replace(/\/v1\/sessions$/, ''))) {
      result.requests.push({ method: r.request().method(), url: r.url(), status: r.status() });
    }
  });
  const q = new URLSearchParams({ endpoint, token });
  await page.goto(`${pageURL}?${q}`);
  await page.waitForFunction(() => typeof window.publish === 'function');
  await page.evaluate(() => window.publish());
  result.resource = await page.evaluate(() => window.whipTest.resource);
  log('published:', result.resource);
  await page.waitForFunction(() => window.whipTest.connected, null, { timeout: 20000 });
  log('connected');
  // The agent's greeting arrives.
  for (const until = Date.now() + 20000; Date.now() < until;) {
    result.heardEnergy = await page.evaluate(() => window.heard());
    if (result.heardEnergy > 0.01) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  log('heard the agent, energy', result.heardEnergy.toFixed(3));
  // The caller's request (the WAV loops) is given time to be spoken and
  // answered; the Go test checks the session's context for it.
  const deadline = Date.now() + 25000;
  while (Date.now() < deadline) {
    const res = await fetch(`${result.resource}/context`, { headers: { Authorization: `Bearer ${token}` } });
    result.context = `${res.status} ${await res.text()}`;
    if (/"name":"book_table","output"/.test(result.context)) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  await page.evaluate(() => window.stop());
  // Let the DELETE's answer arrive.
  await page.waitForTimeout(500);
  result.states = await page.evaluate(() => window.whipTest.log);
  result.ok = true;
} catch (e) {
  result.error = String(e && e.stack || e);
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(result) + '\n');
