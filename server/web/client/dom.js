// DOM helpers the web client's views share: making elements, and logs
// (the transcript, the timeline) that keep following their newest entry
// while the reader is at the end.

export const byId = (id) => document.getElementById(id);

export function el(tag, cls, text) {
  const n = document.createElement(tag);
  if (cls) n.className = cls;
  if (text != null) n.textContent = text;
  return n;
}

// Within this many pixels of the end a log counts as read to the end.
const NEAR_END_PX = 48;

function nearBottom(node) {
  return node.scrollHeight - node.scrollTop - node.clientHeight < NEAR_END_PX;
}

// A log follows new entries while the reader is at its end; scrolling up
// stops that until they scroll back down.
const stuck = new WeakMap();

export function followEnd(node) {
  stuck.set(node, true);
  node.addEventListener('scroll', () => stuck.set(node, nearBottom(node)), { passive: true });
  if (window.ResizeObserver) {
    new ResizeObserver(() => { if (stuck.get(node)) node.scrollTop = node.scrollHeight; }).observe(node);
  }
}

// stickToEnd makes an emptied log follow its end again.
export function stickToEnd(node) {
  stuck.set(node, true);
}

export function withStickyScroll(node, fn) {
  const stick = stuck.has(node) ? stuck.get(node) : nearBottom(node);
  const r = fn();
  if (stick) node.scrollTop = node.scrollHeight;
  return r;
}
