// Opens pages written by `holdline inspect` in Debian's Chromium and
// prints, as JSON, what each shows: the event kinds and sequence numbers
// in its DOM, the page's errors, and whether hovering an item shows the
// event's fields. Saves a screenshot of each page.
//
//   node inspect.mjs OUTDIR PAGE.html...
//
// The pages are opened from file:// with every request elsewhere refused
// and counted, so a page that is not self-contained shows up as requests.
import { chromium } from 'playwright-core';
import { basename } from 'node:path';
import { pathToFileURL } from 'node:url';

const [outDir, ...pages] = process.argv.slice(2);
const log = (...a) => console.error(...a);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const result = { ok: true, pages: [] };
try {
  for (const file of pages) {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    const out = { file, errors: [], requests: [] };
    page.on('pageerror', (e) => out.errors.push(e.message));
    page.on('console', (m) => { if (m.type() === 'error') out.errors.push(m.text()); });
    const url = pathToFileURL(file).href;
    await page.route('**/*', (route) => {
      const u = route.request().url();
      if (u === url) return route.continue();
      out.requests.push(u);
      return route.abort();
    });
    await page.goto(url);
    await page.waitForSelector('.hl-timeline [data-seq]', { state: 'attached' });
    out.renderMs = Math.round(await page.evaluate(() => performance.now()));
    Object.assign(out, await page.evaluate(() => {
      const items = [...document.querySelectorAll('.hl-timeline [data-seq]')];
      const lanes = {};
      for (const n of items) {
        const lane = n.closest('[data-lane]');
        (lanes[lane ? lane.dataset.lane : '?'] ||= []).push(n.dataset.kind);
      }
      const file = JSON.parse(document.getElementById('holdline-events').textContent);
      return {
        kinds: [...new Set(items.map((n) => n.dataset.kind))].sort(),
        seqs: items.map((n) => Number(n.dataset.seq)).sort((a, b) => a - b),
        fileSeqs: file.map((e) => e.seq).sort((a, b) => a - b),
        lanes,
        turnCards: document.querySelectorAll('.hl-turn').length,
        canvasWidth: document.querySelector('.hl-canvas').scrollWidth,
        viewportWidth: document.querySelector('.hl-scroll').clientWidth,
        stageBars: document.querySelectorAll('.hl-turn .hl-stage').length,
        breakdownText: document.querySelector('.hl-breakdown').innerText,
      };
    }));
    // Hover a cut playout or the first item: the tip shows its fields.
    const target = (await page.$('.hl-timeline [data-kind="playout_truncated"]')) || (await page.$('.hl-timeline [data-seq]'));
    await target.scrollIntoViewIfNeeded();
    await target.hover({ force: true });
    out.tip = await page.evaluate(() => {
      const tip = document.querySelector('.hl-tip');
      return tip && !tip.hidden ? tip.innerText : '';
    });
    // Focus another item from the keyboard's side: its tip replaces the first.
    await page.mouse.move(0, 0);
    const other = await page.$$('.hl-timeline [data-seq]');
    await other[1].focus();
    out.focusTip = await page.evaluate(() => {
      const tip = document.querySelector('.hl-tip');
      return tip && !tip.hidden ? tip.innerText : '';
    });
    out.focusKind = await other[1].getAttribute('data-kind');
    // Zoom in: still every item, on a wider canvas.
    const before = await page.evaluate(() => document.querySelector('.hl-canvas').scrollWidth);
    await page.click('.hl-btn[title="Zoom in"]');
    out.zoomed = await page.evaluate((w) => ({
      wider: document.querySelector('.hl-canvas').scrollWidth > w,
      items: document.querySelectorAll('.hl-timeline [data-seq]').length,
    }), before);
    await page.click('.hl-btn[title="Fit the call to the width"]');
    out.screenshot = `${outDir}/${basename(file, '.html')}.png`;
    await page.screenshot({ path: out.screenshot, fullPage: true });
    result.pages.push(out);
    await page.close();
  }
} catch (e) {
  result.ok = false;
  result.error = String(e && e.stack || e);
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(result));
