// Opens the live session view of a running `holdline serve` in Debian's
// Chromium and drives the call from the page's side of the API: typed
// input, then the end of the session. Prints, as JSON, what the timeline
// showed and when.
//
//   node session.mjs URL SESSION_ID TOKEN OUTDIR
import { chromium } from 'playwright-core';

const [url, id, token, outDir] = process.argv.slice(2);
const log = (...a) => console.error(...a);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const result = { ok: false, errors: [] };
let page;
const kindsShown = () => page.evaluate(() => [...new Set([...document.querySelectorAll('#timeline [data-seq]')].map((n) => n.dataset.kind))].sort());
const api = (method, path, body) => page.evaluate(async ([method, path, body, token]) => {
  const res = await fetch(path, { method, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, body });
  return res.status;
}, [method, path, body, token]);
try {
  page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on('pageerror', (e) => result.errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') result.errors.push(m.text()); });
  // The tab's token, as the web client keeps it.
  await page.addInitScript((t) => sessionStorage.setItem('holdline.token', t), token);
  await page.goto(`${url}/sessions/${id}`);
  await page.waitForSelector('#timeline [data-kind="session_started"]', { state: 'attached', timeout: 20000 });
  result.first = await kindsShown();
  result.status = await page.textContent('#status');
  log('live, showing', result.first.join(' '));
  result.input = await api('POST', `/v1/sessions/${id}/input`, JSON.stringify({ text: 'Book a table for two at seven' }));
  await page.waitForSelector('#timeline [data-kind="tool_terminal"]', { state: 'attached', timeout: 30000 });
  await page.waitForSelector('#timeline [data-kind="idle"]', { state: 'attached', timeout: 30000 });
  result.deleted = await api('DELETE', `/v1/sessions/${id}`);
  await page.waitForSelector('#timeline [data-kind="session_ended"]', { state: 'attached', timeout: 20000 });
  await page.waitForFunction(() => window.holdlineSession.ended);
  await page.waitForTimeout(300); // the last frame's redraw
  result.kinds = await kindsShown();
  result.seqs = await page.evaluate(() => [...document.querySelectorAll('#timeline [data-seq]')].map((n) => Number(n.dataset.seq)).sort((a, b) => a - b));
  result.lanes = await page.evaluate(() => [...document.querySelectorAll('#timeline [data-lane]')].map((n) => n.dataset.lane));
  result.endStatus = await page.textContent('#status');
  await page.screenshot({ path: `${outDir}/session-view.png`, fullPage: true });

  // The web client links a session to its lanes view.
  const client = await browser.newPage();
  client.on('pageerror', (e) => result.errors.push(e.message));
  await client.goto(`${url}/`);
  await client.waitForFunction(() => window.holdline && window.holdline.state === 'idle');
  result.linkBefore = await client.isVisible('#open-timeline');
  await client.evaluate((id) => window.holdline._ingest({ type: 'session', id }), id);
  result.linkAfter = await client.isVisible('#open-timeline');
  result.linkHref = await client.getAttribute('#open-timeline', 'href');
  result.ok = true;
} catch (e) {
  result.error = String(e && e.stack || e);
  if (page) await page.screenshot({ path: `${outDir}/session-view-failure.png`, fullPage: true }).catch(() => {});
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(result));
