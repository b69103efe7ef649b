// retryd's console. Every page is built from DOM nodes with text content:
// nothing that came from the API is ever parsed as HTML, so a URL, header,
// error or policy ID with markup in it shows as the text it is.
'use strict';

const SVGNS = 'http://www.w3.org/2000/svg';
const STATUSES = ['PENDING', 'IN_FLIGHT', 'SUCCEEDED', 'EXHAUSTED', 'FAILED', 'CANCELLED'];
const COLORS = { succeeded: '#1a8f4c', retrying: '#c98400', exhausted: '#c62828', failed: '#7b1fa2', p50: '#2357c6', p99: '#c62828' };
// Header names whose values are masked on a task's page: credentials and
// anything that looks like one.
const SECRET = /authorization|cookie|token|secret|password|passwd|api[-_]?key|signature|credential|session/i;

// h builds an element: attrs are set as attributes (on* names are refused,
// so no handler can come from a string), children are nodes or text.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVGNS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (/^on/i.test(k)) throw new Error('event handlers are bound with addEventListener');
    el.setAttribute(k, v === true ? '' : String(v));
  }
}

function append(el, children) {
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

function on(el, event, fn) { el.addEventListener(event, fn); return el; }

// fill replaces el's children as h adds them: unlike replaceChildren, it
// skips null (a part left out) and flattens arrays.
function fill(el, ...children) { el.replaceChildren(); append(el, children); return el; }

// ---- the API ----

class APIError extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || ('HTTP ' + status));
    this.status = status;
    this.code = body && body.error && body.error.code;
  }
}

async function api(method, path, body) {
  const init = { method, credentials: 'same-origin', headers: {} };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  let data = null;
  const text = await res.text();
  if (text) { try { data = JSON.parse(text); } catch (e) { data = null; } }
  if (res.status === 401 && path !== '/ui/session') { showLogin(); throw new APIError(401, data); }
  if (!res.ok) throw new APIError(res.status, data);
  return data;
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, v);
  const str = q.toString();
  return str ? '?' + str : '';
}

// ---- formatting ----

const TIME_FORMAT = { year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', fractionalSecondDigits: 3, hour12: false };
function fmtTime(ms) { return ms ? new Date(ms).toLocaleString(undefined, TIME_FORMAT) : '–'; }

function fmtDur(ms) {
  if (ms === undefined || ms === null || isNaN(ms)) return '–';
  const neg = ms < 0; ms = Math.abs(ms);
  let out;
  if (ms === 0) out = '0';
  else if (ms < 1) out = ms.toFixed(2) + ' ms';
  else if (ms < 1000) out = Math.round(ms) + ' ms';
  else if (ms < 60e3) out = (ms / 1000).toFixed(ms < 10e3 ? 2 : 1) + ' s';
  else if (ms < 3600e3) out = Math.floor(ms / 60e3) + 'm ' + Math.round((ms % 60e3) / 1000) + 's';
  else if (ms < 86400e3) out = Math.floor(ms / 3600e3) + 'h ' + Math.round((ms % 3600e3) / 60e3) + 'm';
  else out = (ms / 86400e3).toFixed(1) + ' d';
  return (neg ? '-' : '') + out;
}

function badge(status) { return h('span', { class: 'badge s-' + status }, status); }

function taskLink(id) { return h('a', { href: '#/task/' + encodeURIComponent(id), class: 'mono' }, id); }

function destinationLink(id) { return h('a', { href: '#/destinations' + query({ destinationId: id }), class: 'mono destination' }, id); }

// requestTarget is where a task's attempts go. A task that names a
// destination has no targetUrl, only the destination's ID and its path
// under the destination's url, which the destination may change.
function requestTarget(t) {
  if (t.destinationId) return [t.method + ' ', destinationLink(t.destinationId), t.path || ''];
  return t.method + ' ' + t.targetUrl;
}

function errorBox(err) { return h('p', { class: 'error', role: 'alert' }, String(err && err.message || err)); }

// ---- routing ----

const state = { timers: [], tenant: '', auth: false };

function clearTimers() { state.timers.forEach(clearInterval); state.timers = []; }
function every(ms, fn) { state.timers.push(setInterval(fn, ms)); }

function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const [path, qs] = raw.split('?');
  return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), params: new URLSearchParams(qs || '') };
}

function setPage(title, ...content) {
  const main = document.getElementById('main');
  main.replaceChildren(h('h1', null, title), ...content);
  document.title = title + ' · retryd';
}

async function route() {
  clearTimers();
  const { parts, params } = parseHash();
  const page = parts[0] || 'overview';
  document.querySelectorAll('header nav a').forEach(a => a.classList.toggle('active', a.dataset.nav === page || (page === 'task' && a.dataset.nav === 'tasks') || (page === 'policy' && a.dataset.nav === 'policies')));
  try {
    switch (page) {
      case 'overview': return await overviewPage();
      case 'tasks': return await tasksPage(params);
      case 'task': return await taskPage(parts[1]);
      case 'dead': return await deadPage();
      case 'destinations': return await destinationsPage(params);
      case 'policies': return await policiesPage();
      case 'policy': return await policyPage(parts[1]);
      case 'preview': return await previewPage();
      default: setPage('Not found', h('p', null, 'No such page.'));
    }
  } catch (err) {
    if (err.status !== 401) setPage('Error', errorBox(err));
  }
}

// ---- sign-in ----

async function whoami() {
  try {
    const s = await api('GET', '/ui/session');
    state.tenant = s.tenant; state.auth = s.auth;
    const who = document.getElementById('who');
    who.replaceChildren(h('span', null, 'tenant ' + s.tenant));
    if (s.auth) {
      who.append(on(h('button', { class: 'secondary', id: 'logout' }, 'Sign out'), 'click', async () => {
        await api('DELETE', '/ui/session');
        showLogin();
      }));
    }
    return true;
  } catch (err) {
    if (err.status === 401) { showLogin(); return false; }
    throw err;
  }
}

function showLogin() {
  clearTimers();
  document.getElementById('who').replaceChildren();
  const input = h('input', { type: 'password', id: 'token', autocomplete: 'off', required: true });
  const msg = h('p', { class: 'error' });
  const form = h('form', { class: 'panel login', id: 'login' },
    h('h1', null, 'Sign in to retryd'),
    h('p', { class: 'muted' }, 'Paste a bearer token from retryd\'s tokens file. The console keeps it in a cookie no script can read.'),
    h('label', null, 'Token', input), h('p'), h('button', { type: 'submit' }, 'Sign in'), msg);
  on(form, 'submit', async ev => {
    ev.preventDefault();
    try {
      await api('POST', '/ui/session', { token: input.value });
      if (await whoami()) route();
    } catch (err) { msg.textContent = err.message; }
  });
  document.getElementById('main').replaceChildren(form);
  input.focus();
}

// ---- charts ----

// lineChart draws series (each {name, color, values}) over xs (epoch ms)
// as an SVG of width × height, with a y axis from 0 to the largest value.
function lineChart(xs, series, { width = 600, height = 200, unit = '' } = {}) {
  const pad = { l: 48, r: 10, t: 10, b: 22 };
  const w = width - pad.l - pad.r, ht = height - pad.t - pad.b;
  let ymax = 0;
  series.forEach(se => se.values.forEach(v => { if (v > ymax) ymax = v; }));
  ymax = niceMax(ymax || 1);
  const x0 = xs[0], x1 = xs[xs.length - 1] || x0 + 1;
  const X = t => pad.l + (x1 === x0 ? 0 : (t - x0) / (x1 - x0) * w);
  const Y = v => pad.t + ht - v / ymax * ht;
  const svg = s('svg', { viewBox: `0 0 ${width} ${height}`, width: '100%', role: 'img' });
  for (let i = 0; i <= 4; i++) {
    const v = ymax * i / 4;
    svg.append(s('line', { class: 'grid', x1: pad.l, x2: pad.l + w, y1: Y(v), y2: Y(v) }),
      s('text', { x: pad.l - 6, y: Y(v) + 4, 'text-anchor': 'end' }, fmtNum(v) + unit));
  }
  for (let m = 0; m <= 60; m += 15) {
    const t = x1 - (60 - m) * 60e3;
    if (t < x0) continue;
    svg.append(s('text', { x: X(t), y: height - 6, 'text-anchor': 'middle' }, m === 60 ? 'now' : '-' + (60 - m) + 'm'));
  }
  svg.append(s('line', { class: 'axis', x1: pad.l, x2: pad.l + w, y1: pad.t + ht, y2: pad.t + ht }));
  for (const se of series) {
    const pts = se.values.map((v, i) => `${X(xs[i]).toFixed(1)},${Y(v).toFixed(1)}`).join(' ');
    svg.append(s('polyline', { points: pts, fill: 'none', stroke: se.color, 'stroke-width': 1.6, 'data-series': se.name }));
  }
  return svg;
}

function niceMax(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function fmtNum(v) { return v >= 100 || v === 0 ? String(Math.round(v)) : v >= 10 ? v.toFixed(1) : v.toFixed(2); }

function legend(items) {
  return h('div', { class: 'legend' }, items.map(([name, color]) =>
    h('span', null, s('svg', { width: 10, height: 10 }, s('rect', { width: 10, height: 10, rx: 2, fill: color })), ' ' + name)));
}

// ---- overview ----

async function overviewPage() {
  const cards = h('div', { class: 'cards', id: 'counts' });
  const charts = h('div', { class: 'charts' });
  const err = h('div');
  setPage('Overview', cards, charts, err);
  const draw = async () => {
    let o;
    try { o = await api('GET', '/overview'); } catch (e) { if (e.status !== 401) err.replaceChildren(errorBox(e)); return; }
    err.replaceChildren();
    const counts = STATUSES.map(st => h('a', { href: '#/tasks?status=' + st, class: 'card', 'data-status': st },
      h('div', { class: 'n' }, String(o.counts ? o.counts[st] || 0 : '–')), h('div', { class: 'l' }, st.replace('_', ' '))));
    cards.replaceChildren(...counts,
      h('a', { href: '#/dead', class: 'card' + (o.deadLetters ? ' bad' : ''), id: 'dead-count' }, h('div', { class: 'n' }, String(o.deadLetters)), h('div', { class: 'l' }, 'dead letters')),
      h('div', { class: 'card ' + (o.store.ready ? 'ok' : 'bad'), id: 'store-ready', title: o.store.error || '' },
        h('div', { class: 'n' }, o.store.ready ? 'ready' : 'down'), h('div', { class: 'l' }, 'store')));
    const xs = o.series.map(p => p.at), step = o.stepSeconds || 10;
    const rate = k => o.series.map(p => p[k] / step);
    const lagged = k => o.series.map(p => p.lagged ? p[k] : 0);
    charts.replaceChildren(
      h('div', { class: 'panel' }, h('h2', null, 'Attempts per second, last hour'),
        legend([['succeeded', COLORS.succeeded], ['retrying', COLORS.retrying], ['exhausted', COLORS.exhausted], ['failed', COLORS.failed]]),
        lineChart(xs, ['succeeded', 'retrying', 'exhausted', 'failed'].map(k => ({ name: k, color: COLORS[k], values: rate(k) })), { unit: '/s' })),
      h('div', { class: 'panel' }, h('h2', null, 'Dispatch lag, last hour'),
        legend([['p50', COLORS.p50], ['p99', COLORS.p99]]),
        lineChart(xs, [{ name: 'p50', color: COLORS.p50, values: lagged('lagP50Ms') }, { name: 'p99', color: COLORS.p99, values: lagged('lagP99Ms') }], { unit: ' ms' })));
  };
  await draw();
  every(2000, draw);
}

// ---- tasks ----

async function tasksPage(params) {
  const f = name => params.get(name) || '';
  const status = h('select', { name: 'status', id: 'f-status' }, h('option', { value: '' }, 'any'),
    STATUSES.map(st => h('option', { value: st, selected: f('status') === st }, st)),
    h('option', { value: 'EXHAUSTED,FAILED', selected: f('status') === 'EXHAUSTED,FAILED' }, 'dead letters'));
  const inputs = {
    policyId: h('input', { name: 'policyId', id: 'f-policy', value: f('policyId'), size: 12 }),
    targetHost: h('input', { name: 'targetHost', id: 'f-host', value: f('targetHost'), placeholder: 'host:port', size: 16 }),
    destinationId: h('input', { name: 'destinationId', id: 'f-destination', value: f('destinationId'), size: 14 }),
    idempotencyKey: h('input', { name: 'idempotencyKey', id: 'f-key', value: f('idempotencyKey'), size: 20 }),
    cause: h('input', { name: 'cause', id: 'f-cause', value: f('cause'), placeholder: 'HTTP 503', size: 12 }),
  };
  const form = h('form', { class: 'filters', id: 'task-filters' },
    h('label', null, 'Status', status), h('label', null, 'Policy', inputs.policyId), h('label', null, 'Target host', inputs.targetHost),
    h('label', null, 'Destination', inputs.destinationId),
    h('label', null, 'Idempotency key', inputs.idempotencyKey), h('label', null, 'Cause', inputs.cause),
    h('button', { type: 'submit' }, 'Search'));
  on(form, 'submit', ev => {
    ev.preventDefault();
    const q = { status: status.value };
    for (const [k, el] of Object.entries(inputs)) q[k] = el.value.trim();
    location.hash = '#/tasks' + query(q);
  });
  const q = { status: f('status'), policyId: f('policyId'), targetHost: f('targetHost'), destinationId: f('destinationId'), idempotencyKey: f('idempotencyKey'), cause: f('cause'), pageToken: f('pageToken'), limit: 50 };
  const page = await api('GET', '/retry-tasks' + query(q));
  const rows = page.items.map(t => h('tr', { 'data-task': t.taskId },
    h('td', null, taskLink(t.taskId)), h('td', null, badge(t.status)), h('td', { class: 'mono' }, t.policyId),
    h('td', { class: 'mono' }, requestTarget(t)), h('td', null, String(t.attemptNumber)),
    h('td', null, t.status === 'PENDING' ? fmtTime(t.nextAttemptAt) : (t.cause || t.lastError || '')), h('td', null, fmtTime(t.createdAt))));
  const table = h('table', { id: 'tasks' }, h('thead', null, h('tr', null, ['Task', 'Status', 'Policy', 'Request', 'Attempts', 'Next / cause', 'Created'].map(c => h('th', null, c)))),
    h('tbody', null, rows.length ? rows : h('tr', null, h('td', { colspan: 7, class: 'muted' }, 'No tasks match.'))));
  const pager = h('div', { class: 'pager' });
  if (f('pageToken')) pager.append(on(h('button', { class: 'secondary' }, 'First page'), 'click', () => { params.delete('pageToken'); location.hash = '#/tasks?' + params; }));
  if (page.nextPageToken) pager.append(on(h('button', { class: 'secondary', id: 'next-page' }, 'Next page'), 'click', () => { params.set('pageToken', page.nextPageToken); location.hash = '#/tasks?' + params; }));
  setPage('Tasks', form, table, pager);
}

async function allAttempts(id) {
  let out = [], token = '';
  do {
    const p = await api('GET', '/retry-tasks/' + encodeURIComponent(id) + '/attempts' + query({ pageToken: token, limit: 1000 }));
    out = out.concat(p.items); token = p.nextPageToken || '';
  } while (token && out.length < 10000);
  return out;
}

async function taskPage(id) {
  const path = '/retry-tasks/' + encodeURIComponent(id);
  const [t, attempts] = await Promise.all([api('GET', path), allAttempts(id)]);
  const msg = h('div');
  const act = async (label, method, p) => {
    try { await api(method, p); route(); } catch (e) { msg.replaceChildren(errorBox(e)); }
  };
  const actions = h('div', { class: 'row' });
  if (t.status === 'PENDING') actions.append(on(h('button', { class: 'danger', id: 'cancel' }, 'Cancel'), 'click', () => act('cancel', 'DELETE', path)));
  if (t.status === 'EXHAUSTED' || t.status === 'FAILED') actions.append(on(h('button', { id: 'redrive' }, 'Redrive'), 'click', () => act('redrive', 'POST', path + '/redrive')));
  const next = h('span', { id: 'countdown' });
  const tick = () => { next.textContent = t.nextAttemptAt ? fmtTime(t.nextAttemptAt) + ' (in ' + fmtDur(Math.max(0, t.nextAttemptAt - Date.now())) + ')' : '–'; };
  tick();
  const headers = Object.keys(t.headers || {}).sort().map(k => h('div', { class: 'mono' }, k + ': ' + (SECRET.test(k) ? '•••••• (masked)' : t.headers[k])));
  let body = '–';
  if (t.bodyRef) body = 'by reference: ' + t.bodyRef + (t.bodySize ? ' (' + t.bodySize + ' bytes)' : '');
  else if (t.bodyBase64) body = 'binary, ' + Math.round(t.bodyBase64.length * 3 / 4) + ' bytes';
  else if (t.body) body = h('pre', { id: 'body' }, t.body.length > 4096 ? t.body.slice(0, 4096) + '… (' + t.body.length + ' bytes)' : t.body);
  const info = h('dl', { class: 'kv' },
    h('dt', null, 'Status'), h('dd', { id: 'status' }, badge(t.status), t.cause ? ' ' + t.cause : ''),
    h('dt', null, 'Policy'), h('dd', null, h('a', { href: '#/policy/' + encodeURIComponent(t.policyId), class: 'mono' }, t.policyId)),
    h('dt', null, 'Idempotency key'), h('dd', { class: 'mono' }, t.idempotencyKey),
    h('dt', null, 'Attempts'), h('dd', null, String(t.attemptNumber)),
    h('dt', null, 'Created'), h('dd', null, fmtTime(t.createdAt)),
    h('dt', null, 'Next attempt'), h('dd', null, t.status === 'PENDING' ? next : '–'),
    h('dt', null, 'Finished'), h('dd', null, fmtTime(t.finishedAt)),
    h('dt', null, 'Last error'), h('dd', { class: 'mono', id: 'last-error' }, t.lastError || '–'));
  const request = h('dl', { class: 'kv', id: 'request' },
    h('dt', null, 'Request'), h('dd', { class: 'mono', id: 'target' }, requestTarget(t)),
    h('dt', null, 'Headers'), h('dd', { id: 'headers' }, headers.length ? headers : '–'),
    h('dt', null, 'Body'), h('dd', null, body));
  const rows = attempts.map(a => h('tr', { 'data-attempt': a.attemptNumber },
    h('td', null, String(a.attemptNumber)), h('td', null, fmtTime(a.startedAt)), h('td', null, a.durationMs ? fmtDur(a.durationMs) : '<1 ms'),
    h('td', null, a.responseStatus ? String(a.responseStatus) : '–'), h('td', { class: 'mono' }, a.errorMessage || ''),
    h('td', { class: 'mono' }, (a.responseBody || '').slice(0, 200))));
  setPage('Task', h('p', { class: 'mono' }, t.taskId), actions, msg,
    h('div', { class: 'panel' }, info),
    h('h2', null, 'Attempt timeline'), h('div', { class: 'panel', id: 'timeline' }, timeline(t, attempts)),
    h('h2', null, 'Attempts'),
    h('table', { id: 'attempts' }, h('thead', null, h('tr', null, ['#', 'Started', 'Took', 'Status', 'Error', 'Response'].map(c => h('th', null, c)))),
      h('tbody', null, rows.length ? rows : h('tr', null, h('td', { colspan: 6, class: 'muted' }, 'No attempt yet.')))),
    h('h2', null, 'Request'), h('div', { class: 'panel' }, request));
  if (t.status === 'PENDING' || t.status === 'IN_FLIGHT') {
    every(1000, tick);
    // Follow the task while it runs: reload when it changed.
    every(3000, async () => {
      try {
        const now = await api('GET', path);
        if (now.updatedAt !== t.updatedAt) route();
      } catch (e) { /* shown on the next full load */ }
    });
  }
}

// timeline draws the task's attempts to scale on one time axis, from its
// creation to its end (or the next attempt): each attempt a bar as long as
// it took, coloured by outcome, and each wait between attempts labelled.
function timeline(t, attempts) {
  const width = 1000, height = 90, pad = 20;
  const end = Math.max(t.finishedAt || 0, t.status === 'PENDING' && t.nextAttemptAt ? t.nextAttemptAt : 0,
    ...attempts.map(a => a.startedAt + a.durationMs), t.createdAt + 1);
  const start = t.createdAt;
  const X = ms => pad + (ms - start) / (end - start) * (width - 2 * pad);
  // Labels at the ends of the axis grow inwards, so none is cut off.
  const anchor = x => x < pad + 40 ? 'start' : x > width - pad - 40 ? 'end' : 'middle';
  const svg = s('svg', { viewBox: `0 0 ${width} ${height}`, width: '100%', role: 'img', 'aria-label': 'attempt timeline' });
  svg.append(s('line', { class: 'axis', x1: pad, x2: width - pad, y1: 50, y2: 50 }),
    s('text', { x: pad, y: 80 }, 'created ' + fmtTime(start)), s('text', { x: width - pad, y: 80, 'text-anchor': 'end' }, fmtDur(end - start) + ' later'));
  let prevEnd = start;
  attempts.forEach((a, i) => {
    const x = X(a.startedAt), w = Math.max(3, X(a.startedAt + a.durationMs) - x);
    const ok = a.responseStatus >= 200 && a.responseStatus < 300 && !a.errorMessage;
    const wait = a.startedAt - prevEnd;
    if (i > 0 && X(a.startedAt) - X(prevEnd) > 40) {
      svg.append(s('text', { x: (X(prevEnd) + x) / 2, y: 44, 'text-anchor': 'middle' }, 'waited ' + fmtDur(wait)));
    }
    svg.append(s('rect', { x, y: 52, width: w, height: 12, rx: 2, fill: ok ? COLORS.succeeded : COLORS.exhausted, 'data-attempt': a.attemptNumber },
      s('title', null, `#${a.attemptNumber} ${fmtTime(a.startedAt)} took ${fmtDur(a.durationMs)} ${a.responseStatus || ''} ${a.errorMessage || ''}`)),
    s('text', { x: x + w / 2, y: 30, 'text-anchor': anchor(x + w / 2) }, '#' + a.attemptNumber + ' ' + (a.responseStatus || 'error')));
    prevEnd = a.startedAt + a.durationMs;
  });
  if (t.status === 'PENDING' && t.nextAttemptAt) {
    const x = X(t.nextAttemptAt);
    svg.append(s('line', { x1: x, x2: x, y1: 36, y2: 66, stroke: COLORS.p50, 'stroke-dasharray': '3 3' }),
      s('text', { x, y: 30, 'text-anchor': anchor(x) }, 'next ' + fmtDur(Math.max(0, t.nextAttemptAt - Date.now())) + ' from now'));
  }
  return svg;
}

// ---- dead letters ----

// bulk repeats a bulk redrive or cancel until the API says no more match,
// showing the running count in out.
async function bulk(verb, filter, out) {
  let total = 0;
  for (;;) {
    const r = await api('POST', '/retry-tasks/' + verb, Object.assign({ limit: 500 }, filter));
    total += r.count;
    out.textContent = (verb === 'redrive' ? 'redriven ' : 'cancelled ') + total + (r.more ? '…' : '');
    if (!r.more || r.count === 0) return total;
  }
}

async function deadPage() {
  const causes = await api('GET', '/dead-letters/causes');
  const progress = h('span', { class: 'progress', id: 'bulk-progress', role: 'status' });
  const msg = h('div');
  // A bulk change asks once more on the button itself: the first click
  // arms it, the second runs it.
  const run = async (verb, filter, ev) => {
    const btn = ev.currentTarget;
    if (!btn.dataset.armed) {
      btn.dataset.armed = '1';
      btn.textContent = 'Confirm ' + verb + '?';
      return;
    }
    btn.disabled = true;
    try { await bulk(verb, filter, progress); setTimeout(route, 800); } catch (e) { msg.replaceChildren(errorBox(e)); }
  };
  const rows = causes.items.map(c => h('tr', { 'data-cause': c.cause },
    h('td', null, h('a', { href: '#/tasks' + query({ status: 'EXHAUSTED,FAILED', cause: c.cause }) }, c.cause)),
    h('td', null, String(c.count)), h('td', null, fmtTime(c.firstSeenAt)), h('td', null, fmtTime(c.lastSeenAt)),
    h('td', { class: 'mono' }, c.example || ''),
    h('td', null, h('div', { class: 'row' },
      on(h('button', { class: 'redrive-group' }, 'Redrive'), 'click', ev => run('redrive', { cause: c.cause }, ev)),
      on(h('button', { class: 'danger cancel-group' }, 'Cancel'), 'click', ev => run('cancel', { cause: c.cause, status: ['EXHAUSTED', 'FAILED'] }, ev))))));
  const policy = h('input', { id: 'bulk-policy', size: 12 }), host = h('input', { id: 'bulk-host', size: 16, placeholder: 'host:port' });
  const form = h('form', { class: 'filters' }, h('label', null, 'Policy', policy), h('label', null, 'Target host', host),
    on(h('button', { type: 'button', id: 'bulk-redrive' }, 'Redrive matching'), 'click', ev => run('redrive', { policyId: policy.value.trim(), targetHost: host.value.trim() }, ev)),
    on(h('button', { type: 'button', class: 'danger' }, 'Cancel matching'), 'click', ev => run('cancel', { policyId: policy.value.trim(), targetHost: host.value.trim(), status: ['EXHAUSTED', 'FAILED'] }, ev)));
  setPage('Dead letters', h('div', { class: 'row' }, h('span', { class: 'muted' }, 'Grouped by cause' + (causes.truncated ? ' (of the first ' + causes.scanned + ' dead letters)' : '')), progress), msg,
    h('table', { id: 'causes' }, h('thead', null, h('tr', null, ['Cause', 'Count', 'First seen', 'Last seen', 'Example', ''].map(c => h('th', null, c)))),
      h('tbody', null, rows.length ? rows : h('tr', null, h('td', { colspan: 6, class: 'muted' }, 'No dead letters.')))),
    h('h2', null, 'Redrive or cancel by filter'), form);
}

// ---- destinations ----

// FIGURES_LIMIT is the page each of a row's task lists reads: a count that
// fills it shows as "N+" instead of walking on, so that a destination with
// a backlog costs the console one page per list, not the backlog.
const FIGURES_LIMIT = 100;

function countOf(page) { return page.items.length + (page.nextPageToken ? '+' : ''); }

// newestError is the task of items whose lastError came last, or null.
function newestError(items) {
  let best = null;
  for (const t of items) {
    if (t.lastError && (!best || (t.finishedAt || t.updatedAt) > (best.finishedAt || best.updatedAt))) best = t;
  }
  return best;
}

function clip(text, n) { return text.length > n ? text.slice(0, n) + '…' : text; }

async function destinationsPage(params) {
  const one = params.get('destinationId') || '';
  const list = async () => {
    if (one) return { items: [await api('GET', '/destinations/' + encodeURIComponent(one))] };
    return api('GET', '/destinations' + query({ pageToken: params.get('pageToken') || '', limit: 50 }));
  };
  let page;
  try { page = await list(); } catch (e) {
    // A retryd without a secrets key keeps no destinations, and says so.
    if (e.status === 503) { setPage('Destinations', errorBox(e)); return; }
    throw e;
  }
  const msg = h('div');
  const rows = new Map();
  const tbody = h('tbody');
  for (const d of page.items) {
    const row = destinationRow(d, msg);
    rows.set(d.destinationId, row);
    tbody.append(row.tr);
  }
  if (!rows.size) tbody.append(h('tr', null, h('td', { colspan: 10, class: 'muted' }, 'No destinations yet: create one with POST /destinations.')));
  const table = h('table', { id: 'destinations' }, h('thead', null, h('tr', null,
    ['Destination', 'URL', 'Status', 'Auth', 'Rate limit', 'Max in flight', 'In flight', 'Pending', 'Last error', ''].map(c => h('th', null, c)))), tbody);
  const pager = h('div', { class: 'pager' });
  if (one || params.get('pageToken')) pager.append(on(h('button', { class: 'secondary' }, 'All destinations'), 'click', () => { location.hash = '#/destinations'; }));
  if (page.nextPageToken) pager.append(on(h('button', { class: 'secondary', id: 'next-page' }, 'Next page'), 'click', () => { params.set('pageToken', page.nextPageToken); location.hash = '#/destinations?' + params; }));
  setPage(one ? 'Destination ' + one : 'Destinations',
    h('p', { class: 'muted' }, 'In flight and pending count one page of ' + FIGURES_LIMIT + ' tasks at most ("' + FIGURES_LIMIT + '+" means more); the last error is the newest of its dead letters and pending tasks. Figures follow every few seconds.'),
    msg, table, pager);
  await Promise.all([...rows.values()].map(r => r.figures()));
  // Follow the rows in place, so that a reason being typed is not lost;
  // a tick that finds the last one still running skips.
  let busy = false;
  every(5000, async () => {
    if (busy) return;
    busy = true;
    try {
      const fresh = (await list()).items;
      const same = fresh.length === rows.size && fresh.every(d => rows.has(d.destinationId));
      if (!same && ![...rows.values()].some(r => r.editing)) { route(); return; }
      await Promise.all(fresh.filter(d => rows.has(d.destinationId)).map(d => {
        const row = rows.get(d.destinationId);
        // Only forward: a list read before a pause must not undo its row.
        if (d.version > row.d.version) row.show(d);
        return row.figures();
      }));
    } catch (e) { /* shown on the next full load */ } finally { busy = false; }
  });
}

// destinationRow is one destination's row: its settings, which show
// redraws, and its live figures, which figures reads. Secrets never reach
// the page as anything but {"set": true}, and the row shows none of them:
// of auth only its type.
function destinationRow(d, msg) {
  const id = d.destinationId;
  const td = cls => h('td', { class: cls });
  const c = { url: td('mono url'), status: td('status'), auth: td('auth'), rate: td('rate nowrap'), cap: td('cap'),
    inFlight: td('in-flight'), pending: td('pending'), lastError: td('last-error'), actions: td('actions nowrap') };
  const tr = h('tr', { 'data-destination': id }, h('td', null, destinationLink(id)),
    c.url, c.status, c.auth, c.rate, c.cap, c.inFlight, c.pending, c.lastError, c.actions);
  const row = { tr, d, editing: false };

  const change = async (verb, reason) => {
    c.actions.querySelectorAll('button, input').forEach(el => { el.disabled = true; });
    try {
      const next = await api('POST', '/destinations/' + encodeURIComponent(id) + '/' + verb, reason ? { reason } : undefined);
      msg.replaceChildren();
      row.editing = false;
      row.show(next);
      await row.figures();
    } catch (e) {
      msg.replaceChildren(errorBox(verb + ' ' + id + ': ' + e.message));
      c.actions.querySelectorAll('button, input').forEach(el => { el.disabled = false; });
    }
  };
  // Pausing asks for an optional reason in the row itself, which the
  // status shows to whoever wonders why the destination's tasks wait.
  const askReason = () => {
    row.editing = true;
    const reason = h('input', { class: 'reason', placeholder: 'reason (optional)', size: 16 });
    const form = h('form', { class: 'row pause-form' }, reason, h('button', { type: 'submit', class: 'confirm-pause' }, 'Pause'),
      on(h('button', { type: 'button', class: 'secondary back' }, 'Back'), 'click', () => { row.editing = false; actions(); }));
    on(form, 'submit', ev => { ev.preventDefault(); change('pause', reason.value.trim()); });
    fill(c.actions, form);
    reason.focus();
  };
  const actions = () => {
    if (row.editing) return;
    if (row.d.status === 'ACTIVE') fill(c.actions, on(h('button', { class: 'secondary pause' }, 'Pause…'), 'click', askReason));
    else fill(c.actions, on(h('button', { class: 'resume' }, 'Resume'), 'click', () => change('resume')));
  };

  row.show = next => {
    row.d = d = next;
    tr.dataset.status = d.status;
    fill(c.url, d.url);
    // A destination that never changed status has been so since created.
    const since = d.statusSince || d.createdAt;
    fill(c.status, badge(d.status),
      d.statusReason ? h('div', { class: 'reason' }, d.statusReason) : null,
      h('div', { class: 'muted since', title: fmtDur(Date.now() - since) + ' ago' }, 'since ' + fmtTime(since)),
      d.failingSince ? h('div', { class: 'failing' }, 'failing since ' + fmtTime(d.failingSince)) : null);
    fill(c.auth, d.auth ? d.auth.type : 'none', d.signing ? h('div', { class: 'muted' }, 'signed, ' + d.signing.scheme) : null);
    const r = d.rateLimit;
    fill(c.rate, r ? r.perSecond + '/s' : 'none', r ? h('div', { class: 'muted' }, 'burst ' + (r.burst || 'default')) : null);
    fill(c.cap, d.maxInFlight ? String(d.maxInFlight) : 'none');
    actions();
  };

  row.figures = async () => {
    const tasks = (path, status) => api('GET', path + query({ destinationId: id, status, limit: FIGURES_LIMIT }));
    const count = (page, status) => h('a', { href: '#/tasks' + query({ status, destinationId: id }), class: 'count' }, countOf(page));
    try {
      const [inFlight, pending, dead] = await Promise.all([tasks('/retry-tasks', 'IN_FLIGHT'), tasks('/retry-tasks', 'PENDING'), tasks('/dead-letters')]);
      fill(c.inFlight, count(inFlight, 'IN_FLIGHT'));
      fill(c.pending, count(pending, 'PENDING'));
      const last = newestError(dead.items.concat(pending.items));
      fill(c.lastError, last
        ? [h('a', { href: '#/task/' + encodeURIComponent(last.taskId), class: 'mono error-text', title: last.lastError }, clip(last.lastError, 160)),
          h('div', { class: 'muted' }, last.status + ', ' + fmtTime(last.finishedAt || last.updatedAt))]
        : h('span', { class: 'muted' }, 'none'));
    } catch (e) {
      if (e.status !== 401) fill(c.lastError, errorBox(e));
    }
  };

  row.show(d);
  return row;
}

// ---- policies ----

async function policiesPage() {
  const page = await api('GET', '/retry-policies' + query({ limit: 1000 }));
  const rows = page.items.map(p => h('tr', { 'data-policy': p.policyId },
    h('td', null, h('a', { href: '#/policy/' + encodeURIComponent(p.policyId), class: 'mono' }, p.policyId), p.builtin ? ' (built-in)' : ''),
    h('td', null, p.backoff + ', ' + fmtDur(p.initialDelayMs) + ' ×' + p.multiplier + ' up to ' + fmtDur(p.maxDelayMs)),
    h('td', null, p.jitterType), h('td', null, String(p.maxAttempts)), h('td', null, p.totalBudgetMs ? fmtDur(p.totalBudgetMs) : 'none')));
  setPage('Policies', h('p', null, h('a', { href: '#/preview', id: 'preview-link' }, 'Preview an unsaved policy →')),
    h('table', { id: 'policies' }, h('thead', null, h('tr', null, ['Policy', 'Backoff', 'Jitter', 'Attempts', 'Budget'].map(c => h('th', null, c)))), h('tbody', null, rows)));
}

async function policyPage(id) {
  const p = await api('GET', '/retry-policies/' + encodeURIComponent(id));
  const pv = await api('POST', '/retry-policies/preview', { policyId: id });
  setPage('Policy ' + id, h('pre', { id: 'spec' }, JSON.stringify(p, null, 2)), h('h2', null, 'What it will do'), previewView(pv));
}

const EXAMPLE_SPEC = { backoff: 'EXPONENTIAL', initialDelayMs: 1000, multiplier: 2, maxDelayMs: 300000, jitterType: 'FULL', maxAttempts: 10, totalBudgetMs: 3600000 };

async function previewPage() {
  const text = h('textarea', { id: 'spec-input', spellcheck: 'false' }, JSON.stringify(EXAMPLE_SPEC, null, 2));
  const out = h('div', { id: 'preview-out' });
  const go = async () => {
    let spec;
    try { spec = JSON.parse(text.value); } catch (e) { out.replaceChildren(errorBox('not JSON: ' + e.message)); return; }
    try { out.replaceChildren(previewView(await api('POST', '/retry-policies/preview', { policy: spec }))); } catch (e) { out.replaceChildren(errorBox(e)); }
  };
  setPage('Preview a policy', h('p', { class: 'muted' }, 'A policy spec as POST /retry-policies takes it (without policyId). Nothing is saved.'),
    text, h('p', null, on(h('button', { id: 'preview' }, 'Preview'), 'click', go)), out);
}

// previewView draws a preview: for each attempt, the range p5–p95 of the
// time from the first attempt to it (a bar) and its median (a dot), with
// the budget across; and the numbers in a table.
function previewView(pv) {
  const rows = pv.attempts;
  const width = 900, height = 260, pad = { l: 60, r: 20, t: 14, b: 30 };
  const w = width - pad.l - pad.r, ht = height - pad.t - pad.b;
  const ymax = niceMax(Math.max(1, ...rows.map(r => r.cumulativeMs.p95), pv.budgetMs || 0));
  const X = i => pad.l + (i + 0.5) * w / rows.length, Y = v => pad.t + ht - v / ymax * ht;
  const svg = s('svg', { viewBox: `0 0 ${width} ${height}`, width: '100%', role: 'img', id: 'preview-chart' });
  for (let i = 0; i <= 4; i++) {
    const v = ymax * i / 4;
    svg.append(s('line', { class: 'grid', x1: pad.l, x2: pad.l + w, y1: Y(v), y2: Y(v) }), s('text', { x: pad.l - 6, y: Y(v) + 4, 'text-anchor': 'end' }, fmtDur(v)));
  }
  rows.forEach((r, i) => {
    const c = r.cumulativeMs;
    svg.append(s('line', { x1: X(i), x2: X(i), y1: Y(c.p5), y2: Y(c.p95), stroke: COLORS.p50, 'stroke-width': 8, 'stroke-opacity': 0.35 }),
      s('circle', { cx: X(i), cy: Y(c.p50), r: 3.5, fill: COLORS.p50 }),
      s('text', { x: X(i), y: height - 10, 'text-anchor': 'middle' }, '#' + r.attempt));
  });
  if (pv.budgetMs) {
    svg.append(s('line', { x1: pad.l, x2: pad.l + w, y1: Y(pv.budgetMs), y2: Y(pv.budgetMs), stroke: COLORS.exhausted, 'stroke-dasharray': '6 4', id: 'budget-line' }),
      s('text', { x: pad.l + w, y: Y(pv.budgetMs) - 4, 'text-anchor': 'end', fill: COLORS.exhausted }, 'budget ' + fmtDur(pv.budgetMs)));
  }
  const pct = o => [fmtDur(o.p5), fmtDur(o.p50), fmtDur(o.p95)];
  const table = h('table', { id: 'preview-table' }, h('thead', null, h('tr', null,
    ['Attempt', 'Delay p5', 'p50', 'p95', 'Cumulative p5', 'p50', 'p95', 'Reached'].map(c => h('th', null, c)))),
  h('tbody', null, rows.map(r => h('tr', null, h('td', null, '#' + r.attempt), pct(r.delayMs).map(v => h('td', null, v)),
    pct(r.cumulativeMs).map(v => h('td', null, v)), h('td', null, (r.reached * 100).toFixed(1) + ' %')))));
  return h('div', null, h('p', { class: 'muted' }, `${pv.samples} runs of the real engine; ${pv.maxAttempts} attempts at most; budget ${pv.budgetMs ? fmtDur(pv.budgetMs) : 'none'}. Bars: p5–p95 of the time from the first attempt; dots: the median.`),
    h('div', { class: 'panel' }, svg), table);
}

// ---- start ----

window.addEventListener('hashchange', route);
(async () => { if (await whoami()) route(); })();
