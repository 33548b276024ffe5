// Holdline call timeline, the layout: which lane each event kind goes in,
// a turn's stages, the marks and spans a call's events make on one time
// axis, and how a lane's items pack into rows. No DOM here: timeline.js
// draws what this lays out, and the Node unit tests (server/webtest) try
// it on its own. A classic script like timeline.js, loaded before it
// (holdline inspect inlines the two together), that defines
// HoldlineTimelineLayout.
(() => {
  'use strict';

  const NS_PER_MS = 1e6;
  const NS_PER_S = 1e9;
  const MAX_ROWS = 6; // rows a lane may grow to before labels give way
  const CHAR_PX = 6.6; // a label's width per character, for packing

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

  globalThis.HoldlineTimelineLayout = {
    NS_PER_MS,
    NS_PER_S,
    LANES,
    OPTIONAL,
    at,
    clock,
    ms,
    stagesOf,
    voiceToVoice,
    order,
    endOf,
    totalOf,
    tickStep,
    layout,
    pack,
    toneOf,
    describe,
  };
})();
