// Holdline call timeline: draws a session's events as lanes on one time
// axis. The same file serves `holdline inspect` (inlined into a
// self-contained page, all events at once) and the live session view of
// `holdline serve` (events added as they arrive). No dependencies, no
// build step; styles are in timeline.css; the layout is timeline-layout.js.
//
//   const tl = HoldlineTimeline.mount(element, events);
//   tl.add(event);        // one more event (live); redraws on the next frame
//
// Every event becomes exactly one focusable element with data-kind and
// data-seq, so nothing in a file is ever dropped: a kind this file does not
// know goes in the "Other" lane.
(() => {
  'use strict';

  const PAD = 16; // px before the call's first instant and after its last
  const ROW = 22; // px per packed row of a lane
  const MIN_SCALE = 2; // px per second
  const MAX_SCALE = 4000;
  const FIT_MIN_SCALE = 8; // a fitted long call scrolls rather than crowd below this

  const {
    NS_PER_S, LANES, OPTIONAL, at, clock, endOf, layout, ms, order, pack, stagesOf, tickStep, toneOf, totalOf, voiceToVoice,
  } = globalThis.HoldlineTimelineLayout;

  function el(tag, cls, text) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text != null) n.textContent = text;
    return n;
  }

  // Timeline is one mounted view.
  class Timeline {
    constructor(root, events) {
      this.root = root;
      this.events = [];
      this.seen = new Set(); // session#seq of the events added live
      this.ids = new WeakMap(); // event → its element's data-id
      this.byId = new Map();
      this.scale = 0; // px per second; 0 until the first layout fits the call
      this.fitted = false;
      this.pending = 0;
      root.classList.add('hl-timeline');
      this.build();
      // A file's events are all kept, even repeats: the page shows the
      // file as it is.
      for (const e of events || []) this.insert(e, false);
      this.draw();
    }

    build() {
      const bar = el('div', 'hl-bar');
      this.summary = el('span', 'hl-summary');
      const zoomOut = el('button', 'hl-btn', '−');
      const zoomIn = el('button', 'hl-btn', '+');
      const fit = el('button', 'hl-btn', 'Fit');
      zoomOut.type = zoomIn.type = fit.type = 'button';
      zoomOut.title = 'Zoom out'; zoomIn.title = 'Zoom in'; fit.title = 'Fit the call to the width';
      zoomOut.addEventListener('click', () => this.zoom(1 / 1.6));
      zoomIn.addEventListener('click', () => this.zoom(1.6));
      fit.addEventListener('click', () => { this.fitted = false; this.draw(); });
      this.scaleLabel = el('span', 'hl-scale');
      bar.append(this.summary, el('span', 'hl-grow'), zoomOut, this.scaleLabel, zoomIn, fit);

      this.scroller = el('div', 'hl-scroll');
      this.scroller.tabIndex = 0;
      this.scroller.setAttribute('aria-label', 'Call timeline; scroll sideways for later events');
      this.scroller.addEventListener('wheel', (ev) => {
        if (!ev.ctrlKey) return;
        ev.preventDefault();
        this.zoom(ev.deltaY < 0 ? 1.25 : 0.8, ev.clientX);
      }, { passive: false });

      this.breakdown = el('section', 'hl-breakdown');
      this.tip = el('div', 'hl-tip');
      this.tip.setAttribute('role', 'tooltip');
      this.tip.hidden = true;
      this.root.replaceChildren(bar, this.scroller, this.breakdown, this.tip);

      const show = (ev) => {
        const item = ev.target.closest && ev.target.closest('[data-seq]');
        if (item && this.root.contains(item)) this.showTip(item);
      };
      this.root.addEventListener('mouseover', show);
      this.root.addEventListener('focusin', show);
      this.root.addEventListener('mouseout', (ev) => {
        if (!ev.relatedTarget || !ev.relatedTarget.closest || !ev.relatedTarget.closest('[data-seq]')) this.hideTip();
      });
      this.root.addEventListener('focusout', () => this.hideTip());
    }

    // add takes one more event and redraws on the next frame, so a burst
    // of events costs one layout.
    add(e) {
      if (!this.insert(e, true)) return;
      if (this.pending) return;
      this.pending = requestAnimationFrame(() => { this.pending = 0; this.draw(); });
    }

    // insert places e in time order; dedupe drops an event already added
    // (a stream read again after a reconnection).
    insert(e, dedupe) {
      if (!e || typeof e !== 'object') return false;
      if (dedupe && typeof e.seq === 'number') {
        const key = `${e.session || ''}#${e.seq}`;
        if (this.seen.has(key)) return false;
        this.seen.add(key);
      }
      const id = String(this.byId.size + 1);
      this.ids.set(e, id);
      this.byId.set(id, e);
      let i = this.events.length;
      while (i > 0 && order(this.events[i - 1], e) > 0) i--;
      this.events.splice(i, 0, e);
      return true;
    }

    zoom(factor, clientX) {
      const rect = this.scroller.getBoundingClientRect();
      const anchor = clientX == null ? rect.width / 2 : clientX - rect.left;
      const t = (this.scroller.scrollLeft + anchor - this.gutter() - PAD) / this.scale;
      this.scale = Math.min(MAX_SCALE, Math.max(MIN_SCALE, this.scale * factor));
      this.fitted = true;
      this.draw();
      this.scroller.scrollLeft = t * this.scale + this.gutter() + PAD - anchor;
    }

    gutter() { return 132; }

    draw() {
      const evs = this.events;
      // Folded rather than spread: a long call's events would overflow
      // the argument list.
      const t0 = evs.length ? evs.reduce((m, e) => Math.min(m, at(e)), Infinity) : 0;
      const t1 = evs.length ? evs.reduce((m, e) => Math.max(m, endOf(e)), -Infinity) : 0;
      const span = Math.max(t1 - t0, NS_PER_S);
      // Until the reader zooms, the whole call fits the width (a live one
      // keeps fitting as it grows), down to a scale still readable.
      if (!this.fitted || !this.scale) {
        // Room for a scrollbar and the last mark's label.
        const width = Math.max((this.scroller.clientWidth || 1000) - this.gutter() - 2 * PAD - 120, 200);
        this.scale = Math.min(MAX_SCALE, Math.max(FIT_MIN_SCALE, width / (span / NS_PER_S)));
      }
      const x = (ns) => PAD + ((ns - t0) / NS_PER_S) * this.scale;
      const width = x(t0 + span) + PAD;
      this.scaleLabel.textContent = this.scale >= 100 ? `${Math.round(this.scale)} px/s` : `${this.scale.toFixed(1)} px/s`;

      const lanes = layout(evs, x, t1);
      const canvas = el('div', 'hl-canvas');
      canvas.style.width = `${width + this.gutter()}px`;
      canvas.append(this.axis(t0, span, x, width));
      for (const lane of LANES) {
        const items = lanes.get(lane.id) || [];
        if (!items.length && OPTIONAL.has(lane.id)) continue;
        canvas.append(this.lane(lane, items, width));
      }
      const left = this.scroller.scrollLeft;
      // A zoomed live view that shows the latest events keeps showing
      // them; a fitted one has nothing to scroll but labels.
      const follow = this.live && this.fitted && left + this.scroller.clientWidth >= this.scroller.scrollWidth - 24;
      this.scroller.replaceChildren(canvas);
      this.scroller.scrollLeft = follow ? this.scroller.scrollWidth : this.fitted ? left : 0;
      this.summarise(evs, t0, t1);
      this.drawBreakdown(evs);
    }

    axis(t0, span, x, width) {
      const axis = el('div', 'hl-axis');
      axis.append(el('div', 'hl-gutter', 'time'));
      const track = el('div', 'hl-track');
      track.style.width = `${width}px`;
      const step = tickStep(this.scale);
      for (let s = 0; s * NS_PER_S <= span + 1; s += step) {
        const tick = el('span', 'hl-tick', clock(s * NS_PER_S));
        tick.style.left = `${x(t0 + s * NS_PER_S)}px`;
        track.append(tick);
      }
      axis.append(track);
      return axis;
    }

    lane(lane, items, width) {
      const row = el('div', `hl-lane hl-lane-${lane.id}`);
      row.dataset.lane = lane.id;
      const rows = pack(items);
      const label = el('div', 'hl-gutter', lane.label);
      row.append(label);
      const track = el('div', 'hl-track');
      track.style.width = `${width}px`;
      track.style.height = `${Math.max(rows, 1) * ROW + 6}px`;
      for (const it of items) track.append(this.item(it));
      row.append(track);
      return row;
    }

    item(it) {
      if (it.synthetic) return syntheticItem(it);
      const e = it.event;
      const n = el('div', `hl-item hl-${it.shape} tone-${it.tone || 'plain'}${it.open ? ' hl-open' : ''}`);
      this.mark(n, e);
      n.style.left = `${it.x}px`;
      n.style.top = `${it.row * ROW + 3}px`;
      if (it.shape === 'span') {
        n.style.width = `${Math.max(it.w, 3)}px`;
        for (const seg of it.segments || []) {
          const s = el('span', `hl-seg seg-${seg.key}`);
          s.style.left = `${seg.x}px`;
          s.style.width = `${Math.max(seg.w, 1)}px`;
          s.title = `${seg.step}: ${ms(seg.ns)}`;
          n.append(s);
        }
      }
      if (it.label) n.append(el('span', 'hl-label', it.label));
      const said = it.label || it.unlabelled;
      n.setAttribute('aria-label', `${e.kind} at ${clock(at(e))}${said ? `: ${said}` : ''}`);
      // A tool call's later events are marks on its span.
      for (const s of it.steps || []) {
        const m = el('span', `hl-step tone-${toneOf(s.event)}`);
        this.mark(m, s.event);
        m.style.left = `${s.x}px`;
        m.setAttribute('aria-label', `${s.event.kind} at ${clock(at(s.event))}`);
        n.append(m);
      }
      return n;
    }

    // mark makes n the element of event e: focusable, found by kind and
    // sequence number, and by id for its tip.
    mark(n, e) {
      n.tabIndex = 0;
      n.dataset.kind = e.kind;
      n.dataset.seq = String(e.seq);
      n.dataset.id = this.ids.get(e);
    }

    summarise(evs, t0, t1) {
      const kinds = new Set(evs.map((e) => e.kind));
      const sessions = [...new Set(evs.map((e) => e.session).filter(Boolean))];
      const parts = [];
      if (sessions.length) parts.push(`session ${sessions.join(', ')}`);
      parts.push(`${evs.length} events, ${kinds.size} kinds`);
      parts.push(`${clock(Math.max(t1 - t0, 0))} long`);
      this.summary.textContent = parts.join(' · ');
    }

    drawBreakdown(evs) {
      const turns = evs.filter((e) => e.kind === 'turn_metrics' && e.turn);
      this.breakdown.replaceChildren(el('h3', null, 'Per-turn breakdown'));
      if (!turns.length) {
        this.breakdown.append(el('p', 'hl-none', 'No turn_metrics events in this call: the per-turn breakdown needs a Holdline that emits them.'));
        return;
      }
      const longest = turns.reduce((m, e) => Math.max(m, totalOf(e.turn)), 1);
      for (const e of turns) this.breakdown.append(turnCard(e, longest));
    }

    showTip(item) {
      const e = this.byId.get(item.dataset.id);
      if (!e) return;
      this.tip.replaceChildren(fieldsOf(e));
      this.tip.hidden = false;
      const r = item.getBoundingClientRect();
      const root = this.root.getBoundingClientRect();
      const left = Math.min(r.left - root.left, root.width - 360);
      this.tip.style.left = `${Math.max(left, 0)}px`;
      this.tip.style.top = `${r.bottom - root.top + 6}px`;
    }

    hideTip() { this.tip.hidden = true; }
  }

  // turnCard is one turn's breakdown: a bar per stage, to one scale.
  function turnCard(e, longest) {
    const t = e.turn;
    const card = el('article', 'hl-turn');
    card.dataset.epoch = String(e.epoch);
    const v = voiceToVoice(t);
    const who = [t.agent, t.model, t.voice].filter(Boolean).join(' · ');
    const head = el('header', null);
    head.append(el('strong', null, `Turn ${e.epoch}`), el('span', 'hl-muted', ` at ${clock(at(e))}${who ? ` — ${who}` : ''}`));
    card.append(head);
    const facts = [];
    if (v != null) facts.push(`voice-to-voice ${ms(v)}`);
    if (t.overhead_ns > 0) facts.push(`Holdline overhead ${ms(t.overhead_ns)}`);
    if (t.tokens_in || t.tokens_out) facts.push(`tokens ${t.tokens_in || 0} in / ${t.tokens_out || 0} out`);
    card.append(el('p', 'hl-facts', facts.join(' · ') || 'no voice-to-voice: the turn did not start from caller speech'));
    const st = stagesOf(t);
    const table = el('div', 'hl-stages');
    let offset = 0;
    for (let i = 1; i < st.length; i++) {
      const d = st[i].at - st[i - 1].at;
      const row = el('div', 'hl-stage');
      row.append(el('span', 'hl-stage-name', `${st[i].step}`), el('span', 'hl-stage-ms', ms(d)));
      const track = el('span', 'hl-stage-track');
      const b = el('span', `hl-seg seg-${st[i].key.replace(/_ns$/, '')}`);
      b.style.left = `${(offset / longest) * 100}%`;
      b.style.width = `${Math.max((d / longest) * 100, 0.3)}%`;
      track.append(b);
      row.append(track);
      row.title = `${st[i - 1].name} → ${st[i].name}`;
      table.append(row);
      offset += d;
    }
    if (st.length < 2) table.append(el('p', 'hl-none', 'fewer than two stages reached'));
    card.append(table);
    return card;
  }

  // fieldsOf lists an event's fields for the tip; durations also in ms.
  function fieldsOf(e) {
    const dl = el('dl', null);
    const add = (k, v) => { dl.append(el('dt', null, k), el('dd', null, v)); };
    for (const [k, v] of Object.entries(e)) {
      if (v && typeof v === 'object') {
        for (const [k2, v2] of Object.entries(v)) add(`${k}.${k2}`, fmt(k2, v2));
      } else {
        add(k, fmt(k, v));
      }
    }
    return dl;
  }

  function fmt(k, v) {
    if (typeof v === 'number' && /_ns$/.test(k)) return `${ms(v)} (${v} ns)`;
    return String(v);
  }

  function syntheticItem(it) {
    const n = el('div', `hl-item hl-span tone-${it.tone}`);
    n.style.left = `${it.x}px`;
    n.style.top = `${it.row * ROW + 3}px`;
    n.style.width = `${Math.max(it.w, 3)}px`;
    n.append(el('span', 'hl-label', it.label));
    n.title = `turn ${it.epoch}: first phrase to the voice's first audio`;
    return n;
  }

  window.HoldlineTimeline = {
    mount(root, events, opts) {
      const tl = new Timeline(root, events);
      tl.live = !!(opts && opts.live);
      return tl;
    },
    lanes: LANES.map((l) => ({ id: l.id, label: l.label, kinds: [...l.kinds] })),
  };
})();
