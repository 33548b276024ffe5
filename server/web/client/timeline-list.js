// The client page's timeline panel: one line per session event in session
// time order, one card per tool call that gathers its steps, and notes of
// what this browser did (timed on the session clock once it is known).
// Its wording is timeline-text.js's; the lanes view is timeline.js.

import { el, stickToEnd, withStickyScroll } from './dom.js';
import {
  NOISY, TOOL_STEPS, chipClass, describe, fmtTime, isToolEvent, lateOutcome, toolStateAfter, toolStepDetail,
} from './timeline-text.js';

// Entries with no session time yet go last.
const UNTIMED = Number.MAX_SAFE_INTEGER;

// createTimelineList draws into the list element; sessionTime maps a
// wall-clock instant onto the session clock, or gives null while that
// clock is unknown.
export function createTimelineList(list, sessionTime) {
  const toolCards = new Map(); // call_id → {li, name, chip, late, committed, steps}
  const pendingLocals = []; // this browser's notes waiting for the session clock

  function insert(li, at) {
    li.dataset.at = String(at);
    withStickyScroll(list, () => {
      let before = null;
      let node = list.lastElementChild;
      while (node && Number(node.dataset.at) > at) {
        before = node;
        node = node.previousElementSibling;
      }
      list.insertBefore(li, before);
    });
  }

  function item({ kind, label, detail, tone, at, epoch, seq, noisy }) {
    const li = el('li', `tl-item tone-${tone || 'plain'}`);
    li.dataset.kind = kind;
    if (seq != null) li.dataset.seq = String(seq);
    if (noisy || NOISY.has(kind)) li.classList.add('noisy');
    const time = el('span', 'tl-time', fmtTime(at));
    const main = el('div', 'tl-main');
    const head = el('div', 'tl-head');
    const lab = el('span', 'tl-label', label);
    lab.title = kind;
    head.appendChild(lab);
    if (epoch) head.appendChild(el('span', 'tl-epoch', `turn ${epoch}`));
    main.appendChild(head);
    if (detail) main.appendChild(el('div', 'tl-detail', detail));
    li.append(time, main);
    return li;
  }

  function setChip(chip, value) {
    chip.textContent = value.replace(/_/g, ' ');
    chip.dataset.state = value;
    chip.className = chipClass(value);
  }

  function toolCard(ev) {
    let card = toolCards.get(ev.call_id);
    if (card) return card;
    const li = el('li', 'tl-item tool tone-tool');
    li.dataset.kind = 'tool';
    li.dataset.call = ev.call_id;
    const time = el('span', 'tl-time', fmtTime(ev.at_ns));
    const main = el('div', 'tl-main');
    const head = el('div', 'tool-head');
    const name = el('span', 'tool-name', ev.tool || 'tool');
    const chip = el('span', 'chip');
    const late = el('span', 'chip late');
    late.hidden = true;
    const committed = el('span', 'chip committed', 'committed');
    committed.hidden = true;
    head.append(name, chip, late, committed);
    const id = el('div', 'tool-id', ev.call_id);
    const steps = el('ol', 'tool-steps');
    main.append(head, id, steps);
    li.append(time, main);
    card = { li, name, chip, late, committed, steps };
    toolCards.set(ev.call_id, card);
    setChip(chip, 'requested');
    insert(li, typeof ev.at_ns === 'number' ? ev.at_ns : UNTIMED);
    return card;
  }

  function renderTool(ev) {
    const card = toolCard(ev);
    if (ev.tool && card.name.textContent !== ev.tool) card.name.textContent = ev.tool;
    const current = card.chip.dataset.state;
    const next = toolStateAfter(current, ev);
    if (next !== current) setChip(card.chip, next);
    if (ev.kind === 'tool_committed') card.committed.hidden = false;
    const late = lateOutcome(ev);
    if (late) {
      card.late.textContent = late;
      card.late.hidden = false;
    }

    const step = el('li', 'tool-step');
    step.dataset.kind = ev.kind;
    step.dataset.seq = String(ev.seq);
    step.append(el('span', 'tl-time', fmtTime(ev.at_ns)), el('span', 'step-label', TOOL_STEPS[ev.kind]));
    const detail = toolStepDetail(ev);
    if (detail) step.appendChild(el('span', 'step-detail', detail));
    withStickyScroll(list, () => card.steps.appendChild(step));
  }

  function render(ev) {
    if (ev.kind === 'transcript' && !ev.final) return; // partials live in the hearing line
    if (isToolEvent(ev)) {
      renderTool(ev);
      return;
    }
    const { label, tone, detail, noisy } = describe(ev);
    const li = item({ kind: ev.kind, label, detail, tone, at: ev.at_ns, epoch: ev.epoch, seq: ev.seq, noisy });
    insert(li, typeof ev.at_ns === 'number' ? ev.at_ns : UNTIMED);
  }

  // addLocal notes something this browser did, such as resuming.
  function addLocal(kind, label, tone) {
    const li = item({ kind, label, detail: 'this browser', tone, at: null });
    li.classList.add('local');
    const wall = Date.now();
    const at = sessionTime(wall);
    if (at != null) {
      li.querySelector('.tl-time').textContent = fmtTime(at);
      insert(li, at);
    } else {
      pendingLocals.push({ li, wall });
      insert(li, UNTIMED);
    }
  }

  // placeLocals moves the notes made before the session clock was known
  // to their places on it.
  function placeLocals() {
    while (pendingLocals.length) {
      const { li, wall } = pendingLocals.shift();
      const at = sessionTime(wall);
      li.querySelector('.tl-time').textContent = fmtTime(at);
      li.remove();
      insert(li, at);
    }
  }

  function reset() {
    pendingLocals.length = 0;
    toolCards.clear();
    list.replaceChildren();
    stickToEnd(list);
  }

  function showAll(all) {
    withStickyScroll(list, () => list.classList.toggle('hide-noisy', !all));
  }

  return { render, addLocal, placeLocals, reset, showAll };
}
