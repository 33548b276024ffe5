// The conversation as bubbles: the caller's turns (typed ones shown at
// once, marked pending until the server takes them), the agent's turns
// (live captions, then the words that were played), and the "hearing:"
// line of what the recogniser has so far.

import { el, stickToEnd, withStickyScroll } from './dom.js';
import { captionShows, finishedWords, userTurnAction } from './transcript-rules.js';

// createTranscript draws into log (the bubbles; empty is its placeholder)
// and hearing (the line under it).
export function createTranscript({ log, empty, hearing }) {
  const agentTurns = new Map(); // epoch → {el, textEl, final}
  const waitingTyped = []; // typed bubbles not yet confirmed by a user_turn

  function makeBubble(role) {
    const b = el('div', `msg ${role}`);
    b.appendChild(el('span', 'who', role === 'user' ? 'You' : 'Agent'));
    const textEl = el('p', 'text');
    b.appendChild(textEl);
    return { b, textEl };
  }

  function append(node) {
    empty.hidden = true;
    withStickyScroll(log, () => {
      // Keep the bubbles above nothing but the end of the log.
      log.appendChild(node);
    });
  }

  function addUser(text, typed) {
    const { b, textEl } = makeBubble('user');
    textEl.textContent = text;
    if (typed) b.appendChild(el('span', 'tag', 'typed'));
    append(b);
    return b;
  }

  // addTyped shows a message the caller typed, pending until its turn.
  function addTyped(text) {
    const b = addUser(text, true);
    b.classList.add('pending');
    waitingTyped.push(b);
  }

  // The server refused the oldest typed message still waiting: it is not a
  // turn, and its bubble says so rather than waiting forever.
  function refuseTyped(reason) {
    const b = waitingTyped.shift();
    if (!b) return;
    b.classList.remove('pending');
    b.classList.add('refused');
    const tag = b.querySelector('.tag');
    if (tag) tag.textContent = 'not sent';
    if (reason) b.title = reason;
  }

  // closeOpen ends every agent bubble still being spoken: the words so
  // far stay, tagged with why they stop there.
  function closeOpen(why) {
    for (const [, turn] of agentTurns) {
      if (turn.final || !turn.el) continue;
      turn.final = true;
      withStickyScroll(log, () => {
        turn.el.classList.remove('live');
        turn.textEl.removeAttribute('aria-hidden');
        if (!turn.textEl.textContent) {
          turn.el.remove();
          return;
        }
        turn.el.classList.add('interrupted');
        turn.el.appendChild(el('span', 'tag', why));
      });
    }
  }

  function agentTurn(epoch) {
    let turn = agentTurns.get(epoch);
    if (!turn) {
      const { b, textEl } = makeBubble('agent');
      b.dataset.epoch = String(epoch);
      turn = { el: b, textEl, final: false };
      agentTurns.set(epoch, turn);
      append(b);
    }
    return turn;
  }

  function caption(epoch, text) {
    if (!captionShows(agentTurns.get(epoch), text)) return;
    const turn = agentTurn(epoch);
    withStickyScroll(log, () => {
      turn.el.classList.add('live');
      // Live words are not announced one by one; the final text is.
      turn.textEl.setAttribute('aria-hidden', 'true');
      turn.textEl.textContent = text;
    });
  }

  function finishAgent(epoch, text, interrupted) {
    const existing = agentTurns.get(epoch);
    const said = finishedWords(existing, text, existing && existing.textEl ? existing.textEl.textContent : '');
    if (said == null) return;
    if (!said) {
      if (existing) {
        existing.el.remove();
        existing.final = true;
      } else {
        agentTurns.set(epoch, { el: null, textEl: null, final: true });
      }
      return;
    }
    const turn = agentTurn(epoch);
    turn.final = true;
    withStickyScroll(log, () => {
      turn.el.classList.remove('live');
      const textEl = el('p', 'text', said);
      turn.textEl.replaceWith(textEl);
      turn.textEl = textEl;
      if (interrupted) {
        turn.el.classList.add('interrupted');
        turn.el.appendChild(el('span', 'tag', 'interrupted'));
      }
    });
  }

  function setHearing(text) {
    if (!text) {
      hearing.hidden = true;
      hearing.textContent = '';
      return;
    }
    hearing.replaceChildren(el('span', 'hearing-label', 'hearing: '), document.createTextNode(text));
    hearing.hidden = false;
  }

  function userTurn(ev) {
    setHearing('');
    switch (userTurnAction(ev, waitingTyped.length)) {
      case 'confirm': {
        const b = waitingTyped.shift();
        b.classList.remove('pending');
        const t = b.querySelector('.text');
        if (ev.text && t.textContent !== ev.text) t.textContent = ev.text;
        break;
      }
      case 'add':
        addUser(ev.text, ev.reason === 'injected');
        break;
      default:
        break;
    }
  }

  function render(ev) {
    switch (ev.kind) {
      case 'user_turn':
        userTurn(ev);
        break;
      case 'transcript':
        if (ev.text) setHearing(ev.text);
        break;
      case 'transcript_ignored':
        setHearing('');
        break;
      case 'playout_done':
        finishAgent(ev.epoch, ev.text || '', false);
        break;
      case 'playout_truncated':
        finishAgent(ev.epoch, ev.text || '', true);
        break;
      default:
        break;
    }
  }

  // hideHearing hides the hearing line but keeps its words, as a session
  // that ends does.
  function hideHearing() {
    hearing.hidden = true;
  }

  function reset() {
    agentTurns.clear();
    waitingTyped.length = 0;
    log.replaceChildren(empty);
    empty.hidden = false;
    hearing.hidden = true;
    hearing.textContent = '';
    stickToEnd(log);
  }

  return { render, caption, addTyped, refuseTyped, closeOpen, setHearing, hideHearing, reset };
}
