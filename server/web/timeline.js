// Holdline call timeline: draws a session's events as lanes on one time
// axis. The same file serves `holdline inspect` (inlined into a
// self-contained page, all events at once) and the live session view of
// `holdline serve` (events added as they arrive). No dependencies, no
// build step; styles are in timeline.css.
//
//   const tl = HoldlineTimeline.mount(element, events);
//   tl.add(event);        // one more event (live); redraws on the next frame
//
// Every event becomes exactly one focusable element with data-kind and
// data-seq, so nothing in a file is ever dropped: a kind this file does not
// know goes in the "Other" lane.
(() => {
  'use strict';

  const NS_PER_MS = 1e6;
  const NS_PER_S = 1e9;
  const PAD = 16; // px before the call's first instant and after its last
  const ROW = 22; // px per packed row of a lane
  const MAX_ROWS = 6; // rows a lane may grow to before labels give way
  const CHAR_PX = 6.6; // a label's width per character, for packing
  const MIN_SCALE = 2; // px per second
  const MAX_SCALE = 4000;
  const FIT_MIN_SCALE = 8; // a fitted long call scrolls rather than crowd below this

  // Lanes in page order. Each kind belongs to one lane; what is not listed
  // falls into "other".
  const LANES = [
    { id: 'session', label: 'Session', kinds: ['session_started', 'session_ended', 'session_resumed', 'session_moved', 'handoff', 'checkpoint_saved', 'checkpoint_failed'] },
    { id: 'caller', label: 'Caller speech', kinds: ['speech_started', 'speech_stopped', 'transcript', 'transcript_ignored', 'user_turn', 'dtmf'] },
    { id: 'barge', label: 'Barge-in', kinds: ['barge_in_suspected', 'barge_in_confirmed', 'barge_in_resumed'] },
    { id: 'agent', label: 'Agent audio', kinds: ['turn_started', 'playout_started', 'playout_done', 'playout_truncated', 'turn_interrupted', 'turn_settled', 'idle'] },
    { id: 'metrics', label: 'Turn breakdown', kinds: ['turn_metrics'] },
    { id: 'model', label: 'Model', kinds: ['inference_sent', 'speculation_started', 'speculation_used', 'speculation_discarded'] },
    { id: 'voice', label: 'Voice', kinds: [] },
    { id: 'tools', label: 'Tools', kinds: ['tool_requested', 'tool_deferred', 'tool_started', 'tool_cancel_requested', 'tool_deduped', 'tool_reconcile', 'tool_late_outcome', 'tool_terminal', 'tool_committed'] },
    { id: 'errors', label: 'Line & errors', kinds: ['transport_lost', 'transport_restored', 'provider_error', 'provider_failover', 'echo_path', 'events_dropped'] },
    { id: 'other', label: 'Other', kinds: [] },
  ];
  // Lanes left out when empty; the others show that nothing happened there.
  const OPTIONAL = new Set(['metrics', 'voice', 'other']);
  const LANE_OF = {};
  for (const l of LANES) for (const k of l.kinds) LANE_OF[k] = l.id;

  // Short names for marks.
  const LABELS = {
    session_started: 'session started', session_ended: 'session ended', session_resumed: 'resumed', session_moved: 'moved',
    handoff: 'handoff', checkpoint_saved: 'checkpoint', checkpoint_failed: 'checkpoint failed',
    speech_started: 'speech', speech_stopped: 'stop', transcript: 'heard', transcript_ignored: 'ignored',
    user_turn: 'caller turn', dtmf: 'key',
    barge_in_suspected: 'suspected', barge_in_confirmed: 'confirmed', barge_in_resumed: 'resumed',
    turn_started: 'turn', playout_started: 'playing', playout_done: 'done', playout_truncated: 'cut',
    turn_interrupted: 'interrupted', turn_settled: 'settled', idle: 'idle',
    inference_sent: 'request', speculation_started: 'speculating', speculation_used: 'speculation used',
    speculation_discarded: 'speculation discarded',
    tool_requested: 'requested', tool_deferred: 'deferred', tool_started: 'started',
    tool_cancel_requested: 'cancel', tool_deduped: 'deduped', tool_reconcile: 'reconcile',
    tool_late_outcome: 'late outcome', tool_terminal: 'terminal', tool_committed: 'committed',
    transport_lost: 'connection lost', transport_restored: 'restored', provider_error: 'provider error',
    provider_failover: 'failover', echo_path: 'echo path', events_dropped: 'events dropped',
    turn_metrics: 'turn metrics',
  };

  // The stages of a turn, in the order a spoken answer passes them, and
  // the name of the step that ends at each (the time from the previous
  // stage reached).
  const STAGES = [
    ['speech_end_ns', 'speech end', ''],
    ['transcript_ns', 'transcript', 'recogniser'],
    ['endpoint_ns', 'endpoint', 'endpointing'],
    ['request_ns', 'request', 'to request'],
    ['first_token_ns', 'first token', 'model'],
    ['first_phrase_ns', 'first phrase', 'first phrase'],
    ['voice_first_audio_ns', 'voice audio', 'voice'],
    ['queued_ns', 'queued', 'to queue'],
    ['first_played_ns', 'played', 'line'],
  ];

  const ms = (ns) => `${(ns / NS_PER_MS).toFixed(ns < 10 * NS_PER_MS ? 1 : 0)} ms`;
  const clock = (ns) => {
    const s = ns / NS_PER_S;
    const m = Math.floor(s / 60);
    return m > 0 ? `${m}:${(s - m * 60).toFixed(3).padStart(6, '0')}` : `${s.toFixed(3)} s`;
  };
  const at = (e) => (typeof e.at_ns === 'number' ? e.at_ns : 0);
  const clip = (s, n) => (s && s.length > n ? `${s.slice(0, n - 1)}…` : s || '');

  function el(tag, cls, text) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text != null) n.textContent = text;
    return n;
  }

  // stagesOf is a turn_metrics event's reached stages, in the order they
  // were reached. A speculative answer asks the model before the endpoint
  // and is queued before it too: its endpoint then comes late, and the
  // step that ends there is named for what it waited on, not
  // "endpointing", so no step is ever negative.
  function stagesOf(turn) {
    const out = [];
    STAGES.forEach(([key, name, step], rank) => {
      const v = turn && turn[key];
      if (typeof v === 'number' && v > 0) out.push({ key, name, step, rank, at: v });
    });
    out.sort((a, b) => a.at - b.at || a.rank - b.rank);
    for (let i = 1; i < out.length; i++) {
      if (out[i - 1].rank > out[i].rank) out[i].step = `to ${out[i].name}`;
    }
    return out;
  }

  function voiceToVoice(turn) {
    if (!turn || !(turn.speech_end_ns > 0) || !(turn.first_played_ns > 0)) return null;
    return turn.first_played_ns - turn.speech_end_ns;
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

  // order sorts events by time, then by sequence.
  function order(a, b) {
    return at(a) - at(b) || (a.seq || 0) - (b.seq || 0);
  }

  // endOf is the last instant an event speaks of (a turn's last stage).
  function endOf(e) {
    const st = e.kind === 'turn_metrics' ? stagesOf(e.turn) : [];
    return Math.max(at(e), ...st.map((s) => s.at));
  }

  function totalOf(turn) {
    const st = stagesOf(turn);
    return st.length > 1 ? st[st.length - 1].at - st[0].at : 0;
  }

  function tickStep(scale) {
    for (const s of [0.1, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800]) {
      if (s * scale >= 90) return s;
    }
    return 3600;
  }

  // layout turns events into items per lane: marks for instants, spans
  // for what lasts (speech, playout, a suspicion, a lost line, a tool
  // call, a turn's stages). Each event is in exactly one item.
  function layout(evs, x, tEnd) {
    const lanes = new Map(LANES.map((l) => [l.id, []]));
    const push = (lane, it) => lanes.get(lane).push(it);
    const open = {}; // what a later event closes: speech, playout by epoch, suspicion, line
    const calls = new Map(); // call_id → [events]
    for (const e of evs) {
      const lane = LANE_OF[e.kind] || 'other';
      if (lane === 'tools' && e.call_id) {
        if (!calls.has(e.call_id)) calls.set(e.call_id, []);
        calls.get(e.call_id).push(e);
        continue;
      }
      const it = { event: e, lane, shape: 'mark', x: x(at(e)), w: 0, label: describe(e), tone: toneOf(e) };
      switch (e.kind) {
        case 'speech_started': case 'barge_in_suspected': case 'transport_lost':
          it.shape = 'span';
          open[e.kind] = it;
          break;
        case 'speech_stopped': closeSpan(open, 'speech_started', e, x); break;
        case 'barge_in_confirmed': case 'barge_in_resumed': closeSpan(open, 'barge_in_suspected', e, x); break;
        case 'transport_restored': closeSpan(open, 'transport_lost', e, x); break;
        case 'playout_started':
          it.shape = 'span';
          open[`play${e.epoch}`] = it;
          break;
        case 'playout_done': case 'playout_truncated': {
          const start = open[`play${e.epoch}`];
          if (start) {
            start.w = it.x - start.x;
            start.label = heard(e);
            start.tone = e.kind === 'playout_truncated' ? 'cut' : 'agent';
            delete open[`play${e.epoch}`];
            it.label = e.kind === 'playout_truncated' ? `✂ cut at ${ms(e.played_ns || 0)}` : '';
          } else if (e.played_ns > 0) {
            // No start in the file (the simulator reports none): what
            // played is the Played before the end.
            it.shape = 'span';
            it.x = x(at(e) - e.played_ns);
            it.w = x(at(e)) - it.x;
          }
          if (!start) it.label = heard(e);
          break;
        }
        case 'turn_metrics': {
          const st = stagesOf(e.turn);
          if (st.length > 1) {
            it.shape = 'span';
            it.x = x(st[0].at);
            it.w = x(st[st.length - 1].at) - it.x;
            it.segments = [];
            for (let i = 1; i < st.length; i++) {
              const a = x(st[i - 1].at);
              it.segments.push({ key: st[i].key.replace(/_ns$/, ''), step: st[i].step, ns: st[i].at - st[i - 1].at, x: a - it.x, w: x(st[i].at) - a });
            }
            // The voice lane shows the voice's share of each turn.
            const v0 = e.turn.first_phrase_ns, v1 = e.turn.voice_first_audio_ns;
            if (v0 > 0 && v1 > 0) {
              push('voice', { event: null, lane: 'voice', shape: 'span', x: x(v0), w: x(v1) - x(v0), label: `${e.turn.voice || 'voice'} ${ms(v1 - v0)}`, tone: 'voice', epoch: e.epoch });
            }
          }
          break;
        }
        default:
          break;
      }
      // A mark's label is its room: packing keeps labels apart.
      push(lane, it);
    }
    // What has not closed yet (a live call, or a file cut short) lasts
    // to the last instant known.
    for (const it of Object.values(open)) {
      it.w = x(tEnd) - it.x;
      it.open = true;
    }
    for (const [id, list] of calls) push('tools', toolItem(id, list, x));
    for (const [id, list] of lanes) {
      lanes.set(id, list.filter((it) => it.event || it.lane === 'voice'));
    }
    // Voice items carry no event of their own: give them a stand-in so
    // they show the turn's fields when hovered.
    for (const it of lanes.get('voice')) if (!it.event) it.synthetic = true;
    return lanes;
  }

  function closeSpan(open, key, e, x) {
    const start = open[key];
    if (!start) return;
    start.w = x(at(e)) - start.x;
    delete open[key];
  }

  // heard is what a playout's end says the caller heard.
  function heard(e) {
    const played = e.played_ns > 0 ? ` (${ms(e.played_ns)})` : '';
    if (e.kind === 'playout_truncated') {
      return e.text ? `✂ cut; heard “${clip(e.text, 60)}”${played}` : `✂ cut before any word${played}`;
    }
    if (!e.text) return e.played_ns > 0 ? `played${played}` : 'done';
    return `“${clip(e.text, 70)}”${played}`;
  }

  // toolItem is one call: a span from its first event to its last, with a
  // mark for each state; the first event carries the span.
  function toolItem(id, list, x) {
    const first = list[0];
    const last = list[list.length - 1];
    const name = list.find((e) => e.tool)?.tool || 'tool';
    const states = list.map((e) => (e.kind === 'tool_terminal' && e.state ? e.state : LABELS[e.kind] || e.kind));
    const x0 = x(at(first));
    const end = list.find((e) => e.kind === 'tool_terminal');
    return {
      event: first, lane: 'tools', shape: 'span', x: x0, w: x(at(last)) - x0,
      label: `${name} ${id}: ${states.join(' → ')}`,
      tone: end && end.state && end.state !== 'succeeded' ? 'warn' : 'tool',
      steps: list.slice(1).map((e) => ({ event: e, x: x(at(e)) - x0 })),
    };
  }

  function toneOf(e) {
    switch (LANE_OF[e.kind]) {
      case 'caller': return e.kind === 'transcript_ignored' ? 'quiet' : 'user';
      case 'barge': return 'barge';
      case 'agent': return e.kind === 'playout_truncated' || e.kind === 'turn_interrupted' ? 'cut' : 'agent';
      case 'model': return 'model';
      case 'metrics': return 'metrics';
      case 'errors': return e.kind === 'transport_restored' || e.kind === 'echo_path' ? 'quiet' : 'warn';
      case 'session': return e.kind === 'checkpoint_failed' ? 'warn' : e.kind === 'checkpoint_saved' ? 'quiet' : 'session';
      case 'tools': return 'tool';
      default: return 'plain';
    }
  }

  // describe is a mark's label: short, the detail is in the tip.
  function describe(e) {
    const base = LABELS[e.kind] || e.kind;
    switch (e.kind) {
      case 'transcript': return `${e.final ? '' : '… '}“${clip(e.text, 40)}”`;
      case 'user_turn': return `caller: “${clip(e.text, 50)}”`;
      case 'transcript_ignored': return `ignored “${clip(e.text, 30)}” ${e.reason || ''}`.trim();
      case 'dtmf': return `key ${e.text || ''}`;
      case 'barge_in_suspected': case 'barge_in_confirmed': case 'barge_in_resumed':
        return e.reason ? `${base}: ${e.reason}` : base;
      case 'turn_started': return `turn ${e.epoch}`;
      case 'speech_started': return 'caller speaking';
      case 'speech_stopped': case 'turn_settled': case 'idle': return '';
      case 'handoff': return `handoff ${e.text || ''}${e.reason ? ` (${e.reason})` : ''}`;
      case 'session_resumed': return `resumed ${e.text || ''}`.trim();
      case 'session_moved': return `moved ${e.text || ''}`.trim();
      case 'session_ended': return e.reason ? `ended: ${clip(e.reason, 40)}` : base;
      case 'provider_error': case 'provider_failover':
        return `${e.provider || ''} ${base}: ${clip(e.error, 40)}`.trim();
      case 'checkpoint_failed': return `${base}: ${clip(e.error, 40)}`;
      case 'speculation_discarded': return e.reason ? `${base}: ${e.reason}` : base;
      case 'speculation_used': return e.delay_ns ? `${base} (−${ms(e.delay_ns)})` : base;
      case 'echo_path': return `echo ${e.state || ''}`.trim();
      case 'events_dropped': return `${e.count || 0} ${base}`;
      case 'turn_metrics': {
        const v = voiceToVoice(e.turn);
        return v == null ? `turn ${e.epoch} ${ms(totalOf(e.turn))}` : `voice-to-voice ${ms(v)}`;
      }
      case 'tool_requested': case 'tool_deferred': case 'tool_started': case 'tool_terminal': case 'tool_committed':
        return `${e.tool || 'tool'} ${e.kind === 'tool_terminal' ? e.state || base : base}`;
      default: return base;
    }
  }

  // pack gives each item of a lane the first row where its box (bar and
  // label) does not overlap the one before it, and returns the rows used.
  // A lane grows to MAX_ROWS labelled rows at most: past that, where a
  // call is too dense for its labels at this zoom, an item goes without
  // its label (the tip and the aria-label still give it) on one more row.
  function pack(items) {
    items.sort((a, b) => a.x - b.x);
    const ends = [];
    let dense = false;
    for (const it of items) {
      const bare = Math.max(it.w, 0) + 10;
      const w = it.label ? bare + it.label.length * CHAR_PX + 4 : bare;
      let r = ends.findIndex((end) => end <= it.x);
      if (r < 0 && ends.length < MAX_ROWS) {
        r = ends.length;
        ends.push(0);
      }
      if (r < 0) {
        // The row below the labelled ones holds the rest, bare: marks may
        // touch there, but never cover a label.
        it.unlabelled = it.label;
        it.label = '';
        it.row = MAX_ROWS;
        dense = true;
        continue;
      }
      ends[r] = it.x + w;
      it.row = r;
    }
    return dense ? MAX_ROWS + 1 : ends.length;
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
