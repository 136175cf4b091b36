/* Reel console: the browser side of `reel ui`.
 *
 * One page, hash routes (#/runs, #/models/clf, ...), plain JavaScript with no build step.
 * uPlot draws every chart and dagre lays out every graph; the JSON API is ui/API.md.
 *
 * Tests read the page through data-test attributes and wait for
 * body[data-ready="1"][data-route="<location.hash>"], set once a page has rendered its data.
 */
'use strict';

const TOKEN_KEY = 'reel.token';
const POLL_MS = 2000;
const DASH = '—';
const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd',
  '#8c564b', '#e377c2', '#17becf', '#bcbd22', '#7f7f7f'];
const SVG_NS = 'http://www.w3.org/2000/svg';
const DAG_FONT = '12px system-ui, -apple-system, "Segoe UI", sans-serif';

/* ------------------------------------------------------------------ DOM helpers */

function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'style' && typeof v === 'object') Object.assign(el.style, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

// Replaces el's children; like h(), it skips null/false children and flattens arrays.
function put(el, ...children) {
  el.replaceChildren();
  return build(el, null, children);
}

function badge(text, kind, attrs) {
  return h('span', {class: `badge ${kind || ''}`, ...attrs}, text);
}

function errorBox(message) {
  return h('div', {class: 'error', 'data-test': 'error', role: 'alert'}, message);
}

function muted(text) {
  return h('p', {class: 'muted'}, text);
}

function section(title, ...children) {
  return h('section', {class: 'card'}, h('h2', {}, title), ...children);
}

// A table from column titles and rows of cells; a column title starting with '#' is right-aligned.
function table(columns, rows, attrs) {
  const head = h('tr', {}, columns.map(c => h('th', {class: c.startsWith('#') ? 'num' : ''},
    c.replace(/^#/, ''))));
  return h('table', {class: 'grid', ...attrs}, h('thead', {}, head), h('tbody', {}, rows));
}

function td(value, attrs) {
  return h('td', attrs, value);
}

function num(value, attrs) {
  return h('td', {class: 'num', ...attrs}, value);
}

// A cell with a small horizontal bar behind the number, so a column reads as a bar chart.
function barCell(text, fraction, attrs) {
  const pct = Math.max(0, Math.min(1, fraction || 0)) * 100;
  return h('td', {class: 'num bar-cell', ...attrs},
    h('span', {class: 'bar', style: {width: pct.toFixed(1) + '%'}}), h('span', {class: 'bar-text'}, text));
}

/* ------------------------------------------------------------------ formatting */

const isNum = v => typeof v === 'number' && Number.isFinite(v);
const fmtFixed = (v, d) => (isNum(v) ? v.toFixed(d) : DASH);
// Loss and accuracies always with 4 decimals, so they compare exactly to metrics rounded to 4.
const fmtLoss = v => fmtFixed(v, 4);
const fmtAcc = v => fmtFixed(v, 4);
const fmtInt = v => (isNum(v) ? String(Math.round(v)) : DASH);
const fmtNum = (v, d = 2) => (isNum(v) ? (Number.isInteger(v) ? String(v) : v.toFixed(d)) : DASH);

function fmtBytes(n) {
  if (!isNum(n)) return DASH;
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? String(n) : n.toFixed(1)) + ' ' + units[i];
}

// Unix milliseconds (runs, pipelines) or an RFC 3339 string (the registry's records).
function fmtTime(ms) {
  if (typeof ms === 'string' && ms !== '') ms = Date.parse(ms);
  if (!isNum(ms) || ms <= 0) return DASH;
  const d = new Date(ms);
  const p = x => String(x).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ` +
    `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

function fmtDuration(sec) {
  if (!isNum(sec) || sec < 0) return DASH;
  if (sec < 60) return sec.toFixed(sec < 10 ? 1 : 0) + ' s';
  const m = Math.floor(sec / 60);
  if (m < 60) return `${m} m ${String(Math.floor(sec % 60)).padStart(2, '0')} s`;
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, '0')} m`;
}

function fmtAgo(ms) {
  if (!isNum(ms) || ms <= 0) return DASH;
  const sec = Math.max(0, (Date.now() - ms) / 1000);
  if (sec < 60) return 'just now';
  if (sec < 3600) return Math.floor(sec / 60) + ' min ago';
  if (sec < 86400) return Math.floor(sec / 3600) + ' h ago';
  return fmtTime(ms).slice(0, 10);
}

// "models:/clf/3" -> "v3" when it names a version of `model` (a bare number too), else the URI itself.
function shortUri(uri, model) {
  if (isNum(uri)) return 'v' + uri;
  const m = /^models:\/(.+)\/(\d+)$/.exec(uri || '');
  return m && m[1] === model ? 'v' + m[2] : uri;
}

/* ------------------------------------------------------------------ API */

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function token() {
  return localStorage.getItem(TOKEN_KEY) || '';
}

// Every API call goes through here so each sends the stored token and reads errors one way.
async function api(path, {method = 'GET', body, as = 'json'} = {}) {
  const headers = {};
  if (token()) headers.Authorization = 'Bearer ' + token();
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, {method, headers, body: body === undefined ? undefined : JSON.stringify(body)});
  if (!res.ok) throw new ApiError(res.status, await errorMessage(res));
  if (as === 'text') return res.text();
  if (as === 'blob') return res.blob();
  return res.json();
}

async function errorMessage(res) {
  const text = await res.text().catch(() => '');
  try {
    const j = JSON.parse(text);
    if (j && j.error) return j.error;
  } catch (_) { /* not JSON: fall through to the status text */ }
  return `${res.status} ${res.statusText}${text ? ': ' + text.slice(0, 200) : ''}`;
}

// For answers where 404 is an expected state (no evaluation yet), not a failure.
async function apiOrNull(path) {
  try {
    return await api(path);
  } catch (e) {
    if (e.status === 404) return null;
    throw e;
  }
}

const enc = encodeURIComponent;
const runApi = name => `/ui/api/runs/${enc(name)}`;
const runHref = name => `#/runs/${enc(name)}`;

/* ------------------------------------------------------------------ page lifecycle */

// Everything a page starts (timers, charts, object URLs) is registered here and torn down when
// the user leaves, so a poll of a page left behind never writes into the next one.
class Page {
  constructor(route) {
    this.route = route;
    this.alive = true;
    this.charts = [];
    this.cleanups = [];
  }

  addChart(chart) {
    this.charts.push(chart);
    return chart;
  }

  dropCharts(charts) {
    for (const c of charts) c.destroy();
    this.charts = this.charts.filter(c => !charts.includes(c));
  }

  onLeave(fn) {
    this.cleanups.push(fn);
  }

  // Calls fn every ms (never two at once) until the page is left or fn returns false.
  poll(ms, fn) {
    let timer = null;
    const tick = async () => {
      if (!this.alive) return;
      let again = true;
      try {
        again = (await fn()) !== false;
      } catch (e) {
        if (e.status === 401) return showLogin();
        console.warn('poll failed:', e);
      }
      if (this.alive && again) timer = setTimeout(tick, ms);
    };
    timer = setTimeout(tick, ms);
    this.onLeave(() => clearTimeout(timer));
  }

  dispose() {
    this.alive = false;
    for (const fn of this.cleanups) fn();
    for (const c of this.charts) c.destroy();
    this.charts = [];
  }
}

let current = null;

function markReady(page) {
  if (page !== current || !page.alive) return;
  document.body.dataset.route = page.route;
  document.body.dataset.ready = '1';
}

/* ------------------------------------------------------------------ routing */

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const qi = raw.indexOf('?');
  const path = qi < 0 ? raw : raw.slice(0, qi);
  const query = new Map();
  // Values are kept raw so lists like runs=a,b can hold names with encoded commas.
  for (const pair of (qi < 0 ? '' : raw.slice(qi + 1)).split('&')) {
    if (!pair) continue;
    const eq = pair.indexOf('=');
    query.set(safeDecode(eq < 0 ? pair : pair.slice(0, eq)), eq < 0 ? '' : pair.slice(eq + 1));
  }
  return {parts: path.split('/').filter(Boolean).map(safeDecode), query};
}

function safeDecode(x) {
  try {
    return decodeURIComponent(x);
  } catch (_) {
    return x;
  }
}

const qget = (query, key) => safeDecode(query.get(key) || '');
const qlist = (query, key) => (query.get(key) || '').split(',').filter(Boolean).map(safeDecode);

function pageFor({parts, query}) {
  const [top, ...rest] = parts;
  const arg = rest.join('/');
  switch (top) {
    case 'runs': return arg ? p => pageRun(p, arg) : pageRuns;
    case 'compare': return p => pageCompare(p, qlist(query, 'runs'));
    case 'datasets': return arg ? p => pageDataset(p, arg) : pageDatasets;
    case 'models': return arg ? p => pageModel(p, arg) : pageModels;
    case 'diff': return p => pageDiff(p, qget(query, 'a'), qget(query, 'b'));
    case 'pipelines': return arg ? p => pagePipeline(p, arg) : pagePipelines;
    case 'jobs': return pageJobs;
    case 'serving': return pageServing;
    default: return null;
  }
}

async function route() {
  const target = parseHash();
  const render = pageFor(target);
  if (!render) {
    location.replace('#/runs');
    return;
  }
  if (current) current.dispose();
  const page = current = new Page(location.hash);
  document.body.dataset.ready = '0';
  document.body.dataset.page = target.parts[0];
  highlightNav(target.parts[0]);
  // Each page renders into its own root, so a slow answer for a page already left lands nowhere.
  page.root = h('div', {class: 'page', 'data-page': target.parts[0]});
  put(document.getElementById('main'), page.root);
  try {
    await render(page);
  } catch (e) {
    if (!page.alive) return;
    if (e.status === 401) return showLogin();
    page.root.append(errorBox(e.message || String(e)));
    console.error(e);
  }
  markReady(page);
}

function highlightNav(top) {
  const section = {compare: 'runs', diff: 'models'}[top] || top;
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.dataset.nav === section);
  }
}

const go = hash => { location.hash = hash; };

/* ------------------------------------------------------------------ auth */

function showLogin(message) {
  if (current) current.dispose();
  const page = current = new Page(location.hash);
  document.body.dataset.ready = '0';
  document.body.dataset.page = 'login';
  const input = h('input', {type: 'password', 'data-test': 'login-token', placeholder: 'token',
    autocomplete: 'off', size: 40});
  const form = h('form', {class: 'login card', 'data-test': 'login', onsubmit: e => {
    e.preventDefault();
    if (!input.value.trim()) return;
    localStorage.setItem(TOKEN_KEY, input.value.trim());
    refreshWhoami().then(route);
  }},
  h('h2', {}, 'Sign in'),
  h('p', {}, 'This console needs a Reel registry token (', h('code', {}, 'reel registry users add'), ').'),
  token() ? errorBox(message || 'The stored token was refused.') : null,
  h('div', {class: 'toolbar'}, input, h('button', {type: 'submit', 'data-test': 'login-submit'}, 'Sign in')));
  put(document.getElementById('main'), form);
  renderWho(null);
  input.focus();
  markReady(page);
}

function signOut() {
  localStorage.removeItem(TOKEN_KEY);
  refreshWhoami().then(route);
}

function renderWho(who) {
  const box = document.getElementById('who');
  if (!who) {
    put(box, h('span', {class: 'muted'}, 'not signed in'));
    return;
  }
  const name = who.auth === false ? 'no auth' : who.user || 'anonymous';
  put(box,
    h('span', {'data-test': 'user'}, name), ' ',
    badge(who.role || 'none', 'role', {'data-test': 'role'}),
    token() ? h('a', {href: '#', 'data-test': 'signout', onclick: e => { e.preventDefault(); signOut(); }},
      'sign out') : null);
}

async function refreshWhoami() {
  try {
    renderWho(await api('/ui/api/whoami'));
  } catch (e) {
    renderWho(null);
  }
}

/* ------------------------------------------------------------------ charts (uPlot) */

// Whether x values look like Unix seconds (a wall clock) rather than seconds since the start.
const isEpochSeconds = xs => xs.some(x => isNum(x) && x > 1e9);

// Tick labels: tiny or huge values (learning rates) in exponent form with as many digits as the
// tick spacing needs, where uPlot's default would print 0.001 for every tick.
function fmtTicks(u, splits, axis, space, incr) {
  const big = Math.max(...splits.map(v => Math.abs(v || 0)));
  if (big !== 0 && (big < 0.01 || big >= 1e6)) {
    // Enough mantissa digits that neighbouring ticks differ, then trailing zeros dropped.
    const digits = v => Math.min(6, Math.max(0, Math.ceil(Math.log10(10 ** Math.floor(Math.log10(Math.abs(v))) / (incr || big)) - 1e-9)));
    return splits.map(v => (v === 0 ? '0' : v.toExponential(digits(v)).replace(/\.?0+e/, 'e')));
  }
  return splits.map(v => String(Number(v.toPrecision(12))));  // drop float noise like 0.30000000000000004
}

// The y axis as wide as its longest tick label (uPlot's fixed default clips labels like 9.980e-4).
function yAxisSize(u, values) {
  if (!values) return 50;
  return Math.max(40, 14 + Math.max(...values.map(v => textWidth(v, '12px system-ui, sans-serif'))));
}

// Legend values under the cursor.
function fmtLegend(v) {
  if (!isNum(v)) return DASH;
  const a = Math.abs(v);
  if (a !== 0 && a < 0.01) return v.toExponential(3);
  if (a < 100) return v.toFixed(4);
  return a < 1e5 ? v.toFixed(1) : String(Math.round(v));
}

function chartOpts({title, width, height = 220, xLabel, time, series}) {
  return {
    title, width, height,
    scales: {x: {time: !!time}},
    legend: {live: true},
    cursor: {drag: {x: true, y: false}},
    axes: [{label: xLabel, labelSize: 20, size: time ? 56 : 40}, {size: yAxisSize, values: fmtTicks}],
    series: [{label: xLabel || 'x'}, ...series.map((sr, i) => ({
      label: sr.label,
      stroke: sr.color || PALETTE[i % PALETTE.length],
      width: 1.5,
      spanGaps: true,
      points: {show: !!sr.points, size: 6},
      value: sr.value || ((u, v) => fmtLegend(v)),
    }))],
  };
}

// Draws a line chart into `holder` (already in the document) and registers it with the page.
function lineChart(page, holder, {title, data, series, xLabel, time, height}) {
  const width = Math.max(300, holder.clientWidth - 4);
  const opts = chartOpts({title, width, height, xLabel, time, series});
  return page.addChart(new uPlot(opts, data, holder));
}

// A bar chart of counts per category (class names on the x axis when they fit).
function barChart(page, holder, {title, labels, values, color}) {
  const width = Math.max(300, holder.clientWidth - 4);
  const xs = labels.map((_, i) => i);
  const named = labels.length <= 40;
  const opts = {
    title, width, height: 240,
    // Bars start at zero so their heights compare; the x range leaves half a bar at each end.
    scales: {x: {time: false, range: (u, min, max) => [min - 0.6, max + 0.6]},
      y: {range: (u, min, max) => [0, Math.max(1, max) * 1.08]}},
    axes: [{
      space: 10,
      rotate: named && labels.length > 8 ? -40 : 0,
      size: named && labels.length > 8 ? 70 : 40,
      incrs: [1, 2, 5, 10, 20, 50, 100],
      values: (u, splits) => splits.map(v => (Number.isInteger(v) ? (named ? labels[v] ?? '' : v) : '')),
    }, {size: 60}],
    series: [{label: 'class', value: (u, v) => (v === null ? DASH : labels[v])},
      {label: 'count', fill: (color || PALETTE[0]) + 'cc', stroke: color || PALETTE[0],
        paths: uPlot.paths.bars({size: [0.7, 60]}), points: {show: false}}],
  };
  return page.addChart(new uPlot(opts, [xs, values], holder));
}

function chartBox(cls) {
  return h('div', {class: 'chart ' + (cls || '')});
}

let resizeTimer = null;
window.addEventListener('resize', () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => {
    for (const c of current ? current.charts : []) {
      const holder = c.root.parentElement;
      if (holder) c.setSize({width: Math.max(300, holder.clientWidth - 4), height: c.height});
    }
  }, 150);
});

/* ------------------------------------------------------------------ graphs (dagre + SVG) */

const measureCtx = document.createElement('canvas').getContext('2d');

function textWidth(text, font = DAG_FONT) {
  measureCtx.font = font;
  return measureCtx.measureText(String(text)).width;
}

// A smooth path through dagre's edge points: straight to the first midpoint, then quadratic curves
// bending at each inner point, then straight to the end.
function pathThrough(points) {
  const f = p => `${p.x.toFixed(1)},${p.y.toFixed(1)}`;
  const mid = (a, b) => ({x: (a.x + b.x) / 2, y: (a.y + b.y) / 2});
  if (points.length < 3) return `M${points.map(f).join(' L')}`;
  let d = `M${f(points[0])} L${f(mid(points[0], points[1]))}`;
  for (let i = 1; i < points.length - 1; i++) d += ` Q${f(points[i])} ${f(mid(points[i], points[i + 1]))}`;
  return d + ` L${f(points[points.length - 1])}`;
}

let dagSeq = 0;

// Lays out nodes ({id, width, height, attrs, draw(g)}) and edges ({from, to, cls}) with dagre and
// draws them as one SVG: dagre gives the coordinates, the drawing is ours.
function drawDag({nodes, edges, rankdir = 'LR', test}) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({rankdir, nodesep: 28, ranksep: 56, marginx: 16, marginy: 16});
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of nodes) g.setNode(n.id, {width: n.width, height: n.height});
  const drawn = edges.filter(e => g.hasNode(e.from) && g.hasNode(e.to));
  for (const e of drawn) g.setEdge(e.from, e.to);
  dagre.layout(g);

  const {width, height} = g.graph();
  const marker = `arrow-${++dagSeq}`;
  const root = s('svg', {class: 'dag', 'data-test': test, width, height, viewBox: `0 0 ${width} ${height}`},
    s('defs', {}, s('marker', {id: marker, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 8,
      markerHeight: 8, orient: 'auto-start-reverse'}, s('path', {d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead'}))));
  for (const e of drawn) {
    root.append(s('path', {class: 'edge ' + (e.cls || ''), d: pathThrough(g.edge(e.from, e.to).points),
      'marker-end': `url(#${marker})`, 'data-test': 'edge', 'data-from': e.from, 'data-to': e.to}));
  }
  for (const n of nodes) {
    const p = g.node(n.id);
    const grp = s('g', {class: 'node', transform: `translate(${p.x - n.width / 2},${p.y - n.height / 2})`,
      'data-node': n.id, ...n.attrs});
    n.draw(grp);
    root.append(grp);
  }
  return h('div', {class: 'dag-scroll'}, root);
}

function svgText(x, y, text, cls) {
  return s('text', {x, y, class: cls || ''}, text);
}

/* ------------------------------------------------------------------ #/runs */

async function pageRuns(page) {
  const root = page.root;
  const {runs} = await api('/ui/api/runs');
  const selected = new Set();
  const compare = h('button', {'data-test': 'compare', disabled: true,
    onclick: () => go('#/compare?runs=' + [...selected].map(enc).join(','))}, 'Compare');
  const onSelect = (name, on) => {
    if (on) selected.add(name); else selected.delete(name);
    compare.disabled = selected.size < 1;
    compare.textContent = selected.size ? `Compare (${selected.size})` : 'Compare';
  };
  const tbody = h('tbody');
  const filter = h('input', {type: 'search', placeholder: 'filter by name', 'data-test': 'run-filter',
    oninput: () => applyFilter(tbody, filter.value)});
  const head = ['', 'name', '#last step', '#epoch', '#loss', '#top-1', '#clips/s', 'state', 'updated'];
  const grid = table(head, [], {'data-test': 'runs-table'});
  grid.replaceChild(tbody, grid.tBodies[0]);
  const fill = list => {
    put(tbody, ...list.map(r => runRow(r, selected, onSelect)));
    applyFilter(tbody, filter.value);
  };

  root.append(h('h1', {}, 'Runs ', h('span', {class: 'muted small'}, `${runs.length} runs`)),
    h('div', {class: 'toolbar'}, filter, compare, h('span', {class: 'muted small'},
      'pick runs to overlay their curves')),
    runs.length ? grid : muted('No runs found in the runs directory.'));
  fill(runs);
  // The list only changes while something trains, so poll only then.
  if (runs.some(r => r.live)) {
    page.poll(5000, async () => {
      const next = (await api('/ui/api/runs')).runs;
      if (page.alive) fill(next);
      return next.some(r => r.live);
    });
  }
}

function applyFilter(tbody, text) {
  const needle = text.trim().toLowerCase();
  for (const row of tbody.rows) row.hidden = !!needle && !row.dataset.run.toLowerCase().includes(needle);
}

function runState(r) {
  if (r.live) return badge('live', 'live', {'data-test': 'run-live'});
  return r.finished ? badge('finished', 'ok') : badge('stopped', 'grey');
}

function runRow(r, selected, onSelect) {
  const box = h('input', {type: 'checkbox', 'data-test': 'run-select', checked: selected.has(r.name),
    'aria-label': 'select ' + r.name, onchange: e => onSelect(r.name, e.target.checked)});
  return h('tr', {'data-test': 'run-row', 'data-run': r.name},
    td(box),
    td(h('a', {href: runHref(r.name)}, r.name)),
    num(fmtInt(r.last_step), {'data-test': 'run-step'}),
    num(fmtNum(r.epoch)),
    num(fmtLoss(r.loss), {'data-test': 'run-loss'}),
    num(fmtAcc(r.top1), {'data-test': 'run-top1'}),
    num(fmtNum(r.clips_per_s, 1)),
    td(runState(r)),
    td(fmtAgo(r.updated_ms), {title: fmtTime(r.updated_ms)}));
}

/* ------------------------------------------------------------------ #/runs/<name> */

const RUN_CHARTS = [
  {key: 'loss', title: 'Loss'},
  {key: 'lr', title: 'Learning rate'},
  {key: 'clips_per_s', title: 'Clips / s'},
  {key: 'input_wait_share', title: 'Input-wait share'},
  {key: 'grad_norm', title: 'Gradient norm', optional: true},
];

async function pageRun(page, name) {
  const root = page.root;
  const [list, metrics, report, config] = await Promise.all([
    api('/ui/api/runs'), api(`${runApi(name)}/metrics`),
    apiOrNull(`${runApi(name)}/eval`), apiOrNull(`${runApi(name)}/config`)]);
  const run = list.runs.find(r => r.name === name) || {name};
  const state = {x: 'step', series: metrics.series, evals: metrics.evals || [], charts: [],
    total: metrics.total_points, lastStep: metrics.last_step, checkpoints: metrics.checkpoints || []};

  const stateBadge = h('span', {}, runState(run));
  const summary = h('p', {class: 'muted', 'data-test': 'run-points', 'data-total': metrics.total_points});
  const chartsBox = h('div', {class: 'charts'});
  const evalBox = h('div');
  root.append(h('h1', {}, name, ' ', stateBadge), summary,
    section('Training', xToggle(state, () => drawRunCharts(page, chartsBox, state)), chartsBox),
    evalBox,
    runConfig(config, state.checkpoints));
  const describe = () => {
    const shown = state.series.step.length;
    const epochs = state.series.epoch || [];
    const epoch = epochs.length ? epochs[epochs.length - 1] : run.epoch;
    summary.dataset.total = state.total;
    summary.textContent = `step ${fmtInt(state.lastStep)} · epoch ${fmtNum(epoch)} · ` +
      `${state.total} logged points` + (shown < state.total ? ` (${shown} shown)` : '');
  };
  describe();
  drawRunCharts(page, chartsBox, state);
  evalBox.append(evalSection(report));
  if (run.live) followRun(page, name, state, {describe, chartsBox, evalBox, stateBadge});
}

// A step / wall-time switch for the x axis of a run's charts.
function xToggle(state, redraw) {
  const mk = (mode, label) => h('button', {class: 'seg' + (state.x === mode ? ' on' : ''),
    'data-test': 'x-' + mode, onclick: e => {
      state.x = mode;
      for (const b of e.target.parentElement.children) b.classList.toggle('on', b === e.target);
      redraw();
    }}, label);
  return h('div', {class: 'toolbar'}, h('span', {class: 'muted small'}, 'x axis:'),
    h('span', {class: 'segmented'}, mk('step', 'step'), mk('wall', 'wall time')));
}

function runXAxis(state, series) {
  const xs = state.x === 'wall' ? series.wall_s : series.step;
  const time = state.x === 'wall' && isEpochSeconds(xs);
  return {xs, time, xLabel: state.x === 'wall' ? (time ? 'wall time' : 'seconds') : 'step'};
}

function runChartData(state, key) {
  return [runXAxis(state, state.series).xs, state.series[key] || []];
}

function evalChartData(state) {
  const ev = state.evals;
  const xs = state.x === 'wall' ? ev.map(e => e.wall_s) : ev.map(e => e.step);
  return [xs, ev.map(e => e.top1), ev.map(e => e.top5), ev.map(e => e.video_top1)];
}

function drawRunCharts(page, box, state) {
  page.dropCharts(state.charts);
  state.charts = [];
  box.replaceChildren();
  const {time, xLabel} = runXAxis(state, state.series);
  for (const c of RUN_CHARTS) {
    const ys = state.series[c.key] || [];
    if (c.optional && !ys.some(isNum)) continue;
    const holder = chartBox();
    box.append(holder);
    const chart = lineChart(page, holder, {title: c.title, xLabel, time, data: runChartData(state, c.key),
      series: [{label: c.title, color: PALETTE[state.charts.length % PALETTE.length]}]});
    chart.key = c.key;
    state.charts.push(chart);
  }
  const holder = chartBox();
  box.append(holder);
  const evalTime = state.x === 'wall' && isEpochSeconds(state.evals.map(e => e.wall_s));
  const chart = lineChart(page, holder, {title: 'Evaluation accuracy', xLabel, time: evalTime,
    data: evalChartData(state), series: [{label: 'top-1', points: true}, {label: 'top-5', points: true},
      {label: 'video top-1', points: true}]});
  chart.key = 'evals';
  state.charts.push(chart);
}

// While a run trains: fetch only the points after the last one seen and append them.
function followRun(page, name, state, view) {
  let ticks = 0;
  page.poll(POLL_MS, async () => {
    const m = await api(`${runApi(name)}/metrics?since=${state.lastStep}`);
    if (!page.alive) return false;
    const grew = appendSeries(state, m);
    const newEvals = appendEvals(state, m.evals || []);
    if (grew || newEvals) {
      for (const c of state.charts) c.setData(c.key === 'evals' ? evalChartData(state) : runChartData(state, c.key));
      view.describe();
    }
    if (newEvals) {
      const rep = await apiOrNull(`${runApi(name)}/eval`);
      if (page.alive) put(view.evalBox, evalSection(rep));
    }
    // Every 10 s ask whether the run still trains; stop polling once it does not.
    if (++ticks % 5 === 0) {
      const run = (await api('/ui/api/runs')).runs.find(r => r.name === name);
      if (run && !run.live) {
        put(view.stateBadge, runState(run));
        return false;
      }
    }
    return true;
  });
}

function appendSeries(state, m) {
  const src = m.series || {};
  const steps = src.step || [];
  const last = state.series.step.length ? state.series.step[state.series.step.length - 1] : -Infinity;
  let added = 0;
  for (let i = 0; i < steps.length; i++) {
    if (!(steps[i] > last)) continue;  // the server answers after `since`; guard against overlap anyway
    for (const key of Object.keys(state.series)) {
      state.series[key].push(src[key] ? src[key][i] ?? null : null);
    }
    added++;
  }
  if (isNum(m.last_step)) state.lastStep = Math.max(state.lastStep, m.last_step);
  if (isNum(m.total_points)) state.total = Math.max(state.total + added, m.total_points);
  return added > 0;
}

function appendEvals(state, evals) {
  const seen = new Set(state.evals.map(e => `${e.step}/${e.event}`));
  const fresh = evals.filter(e => !seen.has(`${e.step}/${e.event}`));
  state.evals.push(...fresh);
  state.evals.sort((a, b) => a.step - b.step);
  return fresh.length > 0;
}

function evalSection(rep) {
  if (!rep) return section('Evaluation', muted('No evaluation yet.'));
  const names = rep.class_names || [];
  const stat = (label, value, test) => h('div', {class: 'stat'}, h('div', {class: 'stat-label'}, label),
    h('div', {class: 'stat-value', 'data-test': test}, value));
  return section(`Evaluation at step ${fmtInt(rep.step)}`,
    h('div', {class: 'stats'},
      stat('top-1', fmtAcc(rep.top1), 'eval-top1'),
      stat('top-5', fmtAcc(rep.top5), 'eval-top5'),
      stat('video top-1', fmtAcc(rep.video_top1), 'eval-video-top1'),
      stat('epoch', fmtNum(rep.epoch), 'eval-epoch'),
      stat('event', rep.event || DASH, 'eval-event'),
      stat('clips / videos', `${fmtInt(rep.clips)} / ${fmtInt(rep.videos)}`, 'eval-size')),
    h('div', {class: 'two-col'},
      h('div', {}, h('h3', {}, 'Per-class accuracy'), perClassTable(rep)),
      h('div', {}, h('h3', {}, 'Confusion matrix'), muted('rows: true class · columns: predicted'),
        confusionTable(rep.confusion || [], names))),
    h('h3', {}, 'Wrong videos'), wrongTable(rep.wrong || [], names));
}

function perClassTable(rep) {
  const names = rep.class_names || [];
  const counts = rep.per_class_count || [];
  const rows = (rep.per_class || []).map((acc, i) => h('tr', {'data-test': 'per-class', 'data-class': names[i]},
    td(names[i] ?? String(i)), barCell(fmtAcc(acc), acc, {'data-test': 'per-class-acc'}), num(fmtInt(counts[i]))));
  return table(['class', '#accuracy', '#clips'], rows);
}

// The confusion matrix as a heat map: each cell shaded by its share of the true class's clips,
// blue on the diagonal (right), red off it (mistakes), with the count written in the cell.
function confusionTable(matrix, names) {
  const MAX = 100;  // a wider matrix is unreadable as a table; the per-class table still lists all
  const n = Math.min(matrix.length, MAX);
  const label = i => names[i] ?? String(i);
  const head = h('tr', {}, h('th', {class: 'corner'}, 'true \\ pred'),
    Array.from({length: n}, (_, j) => h('th', {class: 'col-label', 'data-col': j, title: label(j)},
      h('span', {}, label(j)))));
  const rows = [];
  for (let i = 0; i < n; i++) {
    const row = matrix[i] || [];
    const total = row.reduce((a, b) => a + (b || 0), 0) || 1;
    const cells = [];
    for (let j = 0; j < n; j++) {
      const v = row[j] || 0;
      const share = v / total;
      const rgb = i === j ? '31,119,180' : '214,39,40';
      cells.push(h('td', {'data-row': i, 'data-col': j, class: share > 0.55 ? 'dark' : '',
        title: `${label(i)} → ${label(j)}: ${v} (${(share * 100).toFixed(1)}%)`,
        style: {background: v ? `rgba(${rgb},${(0.08 + 0.92 * share).toFixed(3)})` : ''}}, String(row[j] ?? 0)));
    }
    rows.push(h('tr', {}, h('th', {class: 'row-label', 'data-row': i}, label(i)), cells));
  }
  return h('div', {class: 'scroll-x'},
    h('table', {class: 'confusion', 'data-test': 'confusion'}, h('thead', {}, head), h('tbody', {}, rows)),
    matrix.length > MAX ? muted(`showing the first ${MAX} of ${matrix.length} classes`) : null);
}

function wrongTable(wrong, names) {
  if (!wrong.length) return muted('None.');
  const cls = v => (isNum(v) && names[v] !== undefined ? names[v] : v);
  return table(['video', 'label', 'predicted', '#confidence'], wrong.map(w => h('tr', {'data-test': 'wrong'},
    td(w.video, {class: 'mono'}), td(cls(w.label)), td(cls(w.predicted)), num(fmtFixed(w.confidence, 3)))));
}

function runConfig(config, metricCheckpoints) {
  const cps = config && config.checkpoints && config.checkpoints.length ? config.checkpoints : null;
  const checkpoints = cps
    ? table(['#step', 'uri', '#size'], cps.map(c => h('tr', {'data-test': 'checkpoint'},
      num(fmtInt(c.step)), td(c.uri, {class: 'mono'}), num(fmtBytes(c.bytes)))))
    : metricCheckpoints.length
      ? table(['#step', '#save time', 'wall'], metricCheckpoints.map(c => h('tr', {'data-test': 'checkpoint'},
        num(fmtInt(c.step)), num(fmtDuration(c.seconds)), td(fmtTime(c.wall_s * 1000)))))
      : muted('No checkpoints.');
  return h('div', {class: 'two-col'},
    section('Config', config && config.config
      ? h('pre', {class: 'config', 'data-test': 'config'}, config.config) : muted('No config recorded.')),
    section('Checkpoints', checkpoints));
}

/* ------------------------------------------------------------------ #/compare */

async function pageCompare(page, names) {
  const root = page.root;
  root.append(h('h1', {}, 'Compare runs'));
  if (!names.length) {
    root.append(muted('Pick runs on the Runs page first.'));
    return;
  }
  const [list, ...metrics] = await Promise.all([api('/ui/api/runs'),
    ...names.map(n => api(`${runApi(n)}/metrics?max_points=2000`))]);
  const byName = new Map(list.runs.map(r => [r.name, r]));
  const color = i => PALETTE[i % PALETTE.length];
  root.append(section('Runs', table(['', 'name', '#last step', '#loss', '#top-1', '#points'],
    names.map((n, i) => {
      const r = byName.get(n) || {};
      return h('tr', {'data-test': 'compare-run', 'data-run': n},
        td(h('span', {class: 'swatch', style: {background: color(i)}})), td(h('a', {href: runHref(n)}, n)),
        num(fmtInt(r.last_step)), num(fmtLoss(r.loss)), num(fmtAcc(r.top1)), num(fmtInt(metrics[i].total_points)));
    }))));
  const lossBox = chartBox('wide');
  const evalBox = chartBox('wide');
  root.append(section('Loss', lossBox), section('Top-1 accuracy', evalBox));
  const series = names.map((n, i) => ({label: n, color: color(i)}));
  // Runs log different steps; uPlot.join aligns them on one x axis with gaps where a run has none.
  const loss = uPlot.join(metrics.map(m => [m.series.step, m.series.loss]));
  lineChart(page, lossBox, {title: 'Loss over step', xLabel: 'step', data: loss, series, height: 320});
  const evals = uPlot.join(metrics.map(m => {
    const ev = (m.evals || []).slice().sort((a, b) => a.step - b.step);
    return [ev.map(e => e.step), ev.map(e => e.top1)];
  }));
  lineChart(page, evalBox, {title: 'Top-1 over step', xLabel: 'step', data: evals, height: 280,
    series: series.map(sr => ({...sr, points: true}))});
}

/* ------------------------------------------------------------------ #/datasets */

async function pageDatasets(page) {
  const {datasets} = await api('/ui/api/datasets');
  const splitsText = d => Object.entries(d.splits || {}).map(([k, v]) => `${k} ${v.records}`).join(' · ');
  const bytes = d => Object.values(d.splits || {}).reduce((a, v) => a + (v.bytes || 0), 0);
  const rows = datasets.map((d, i) => h('tr', {'data-test': 'dataset-row', 'data-dataset': d.name, 'data-index': i},
    td(h('a', {href: `#/datasets/${i}`}, d.name)), td(d.uri, {class: 'mono small'}), td(d.mode || DASH),
    num(fmtInt((d.classes || []).length)), td(splitsText(d)), num(fmtBytes(bytes(d))), num(fmtInt(d.skipped))));
  page.root.append(h('h1', {}, 'Datasets'),
    datasets.length ? table(['name', 'uri', 'mode', '#classes', 'records', '#size', '#skipped'], rows,
      {'data-test': 'datasets-table'}) : muted('No datasets found.'));
}

async function pageDataset(page, index) {
  const d = await api(`/ui/api/datasets/${enc(index)}`);
  const root = page.root;
  const classes = d.classes || [];
  const splits = Object.entries(d.splits || {});
  root.append(h('h1', {}, d.name), h('p', {class: 'muted mono'}, d.uri, d.mode ? ` · ${d.mode}` : ''),
    section('Splits', table(['split', '#records', '#size', '#shards', '#imbalance (max/min)'],
      splits.map(([name, sp]) => h('tr', {'data-test': 'split', 'data-split': name}, td(name),
        num(fmtInt(sp.records)), num(fmtBytes(sp.bytes)), num(fmtInt(sp.shards)), num(imbalance(sp.class_counts)))))));
  const charts = h('div', {class: 'charts'});
  root.append(section('Class counts', charts, classCountTable(classes, splits)));
  splits.forEach(([name, sp], i) => {
    const holder = chartBox();
    charts.append(holder);
    barChart(page, holder, {title: name, labels: classes, values: sp.class_counts || [], color: PALETTE[i % 10]});
  });
  root.append(section('Shards', shardTables(d.shards || {})),
    section(`Skipped videos (${(d.skipped_videos || []).length})`, skippedTable(d.skipped_videos || [])));
  const grid = h('div', {class: 'previews', 'data-test': 'previews'});
  root.append(section('Previews', muted(`Up to ${PREVIEWS_PER_CLASS} clips of each class, decoded by Reel.`), grid));
  loadPreviews(page, grid, index, classes, splits);
}

function imbalance(counts) {
  const xs = (counts || []).filter(isNum);
  if (!xs.length) return DASH;
  const min = Math.min(...xs);
  return min > 0 ? (Math.max(...xs) / min).toFixed(2) + '×' : '∞';
}

function classCountTable(classes, splits) {
  const maxOf = splits.map(([, sp]) => Math.max(1, ...(sp.class_counts || []).filter(isNum)));
  const rows = classes.map((c, i) => h('tr', {}, td(c), splits.map(([name, sp], k) => {
    const v = (sp.class_counts || [])[i];
    return barCell(fmtInt(v), (v || 0) / maxOf[k], {'data-test': 'dataset-class-count', 'data-class': c,
      'data-class-index': i, 'data-split': name});
  })));
  return h('details', {open: classes.length <= 50},
    h('summary', {}, `Per-class table (${classes.length} classes)`),
    table(['class', ...splits.map(([n]) => '#' + n)], rows, {'data-test': 'class-counts'}));
}

function shardTables(shards) {
  const entries = Object.entries(shards);
  if (!entries.length) return muted('No shard list.');
  return entries.map(([split, list]) => {
    const max = Math.max(1, ...list.map(x => x.tar_bytes || 0));
    return h('details', {open: list.length <= 20},
      h('summary', {}, `${split}: ${list.length} shards, ${fmtBytes(list.reduce((a, x) => a + (x.tar_bytes || 0), 0))}`),
      table(['shard', '#records', '#size'], list.map(x => h('tr', {'data-test': 'shard'},
        td(x.name, {class: 'mono'}), num(fmtInt(x.records)), barCell(fmtBytes(x.tar_bytes), x.tar_bytes / max)))));
  });
}

function skippedTable(skipped) {
  if (!skipped.length) return muted('None.');
  return table(['video', 'reason'], skipped.map(x => h('tr', {'data-test': 'skipped'},
    td(x.uri, {class: 'mono'}), td(x.reason))));
}

// <img> cannot send the Authorization header, so each GIF is fetched with the token and shown
// from an object URL; a few at a time so a dataset with many classes does not flood the server.
const PREVIEWS_PER_CLASS = 3;

// A row of clips per class (as many as the splits hold, up to PREVIEWS_PER_CLASS).
function loadPreviews(page, grid, index, classes, splits) {
  const urls = [];
  page.onLeave(() => urls.forEach(u => URL.revokeObjectURL(u)));
  const figures = classes.flatMap((c, i) => {
    const held = splits.reduce((n, [, sp]) => n + ((sp.class_counts || [])[i] || 0), 0);
    return Array.from({length: Math.min(PREVIEWS_PER_CLASS, held)}, (_, k) => {
      const img = h('img', {alt: `${c} #${k + 1}`, 'data-class': c, loading: 'lazy'});
      const fig = h('figure', {'data-test': 'preview', 'data-class': c, 'data-clip': k}, img,
        h('figcaption', {}, k === 0 ? c : `#${k + 1}`));
      grid.append(fig);
      return {i, k, img, fig};
    });
  });
  let next = 0;
  const worker = async () => {
    while (page.alive && next < figures.length) {
      const f = figures[next++];
      try {
        const blob = await api(`/ui/api/datasets/${enc(index)}/preview/${f.i}?clip=${f.k}`, {as: 'blob'});
        if (!page.alive) return;
        const url = URL.createObjectURL(blob);
        urls.push(url);
        f.img.src = url;
      } catch (e) {
        f.fig.classList.add('missing');
        f.img.replaceWith(h('div', {class: 'no-preview'}, e.status === 404 ? 'no clip' : 'preview failed'));
      }
    }
  };
  for (let k = 0; k < 4; k++) worker();
}

/* ------------------------------------------------------------------ #/models */

function aliasBadges(aliases) {
  return (aliases || []).map(a => badge(a.name ? `${a.name}${a.version !== undefined ? ' → v' + a.version : ''}`
    : a, 'alias' + (a.protected ? ' protected' : '')));
}

async function pageModels(page) {
  const {models} = await api('/ui/api/models');
  const rows = models.map(m => h('tr', {'data-test': 'model-row', 'data-model': m.name},
    td(h('a', {href: `#/models/${enc(m.name)}`}, m.name)), num(fmtInt(m.versions)), num(m.latest ? 'v' + m.latest : DASH),
    td(aliasBadges(m.aliases)), td(fmtTime(m.created_at)), td(m.created_by || DASH)));
  page.root.append(h('h1', {}, 'Models'), models.length
    ? table(['name', '#versions', '#latest', 'aliases', 'created', 'by'], rows, {'data-test': 'models-table'})
    : muted('No models you may read.'));
}

async function pageModel(page, name) {
  const root = page.root;
  const [m, lineage] = await Promise.all([api(`/ui/api/models/${enc(name)}`),
    apiOrNull(`/ui/api/models/${enc(name)}/lineage`)]);
  const versions = m.versions || [];
  root.append(h('h1', {}, name, ' ', h('span', {class: 'muted small'}, `your role: ${m.role || DASH}`)),
    section('Versions', versionsTable(m)),
    h('div', {class: 'two-col'},
      section('Aliases', aliasesBox(page, m)),
      section('Branches', table(['branch', 'head', 'updated'], (m.branches || []).map(b =>
        h('tr', {'data-test': 'branch', 'data-branch': b.name}, td(b.name), td(shortUri(b.head, name) ?? DASH),
          td(fmtTime(b.updated_at))))))),
    section('Lineage', lineage ? lineageGraph(lineage, name) : muted('No lineage.')),
    h('div', {class: 'two-col'},
      section('Diff two versions', diffForm(versions)),
      section('Alias history', aliasHistory(m.alias_history || []))));
}

function versionsTable(m) {
  const aliasesOf = v => (m.aliases || []).filter(a => a.version === v.version);
  const rows = (m.versions || []).map(v => h('tr', {'data-test': 'version-row', 'data-version': v.version},
    num('v' + v.version), td(v.branch || DASH), num(fmtAcc((v.metrics || {}).top1), {'data-test': 'version-top1'}),
    td(v.author || DASH), td(fmtTime(v.created_at)), td(v.message || '', {class: 'message'}),
    td((v.parents || []).map(p => shortUri(p, m.name)).join(', ') || DASH),
    td(aliasesOf(v).map(a => badge(a.name, 'alias' + (a.protected ? ' protected' : ''))))));
  return table(['#version', 'branch', '#top-1', 'author', 'created', 'message', 'parents', 'aliases'], rows,
    {'data-test': 'versions-table'});
}

function versionSelect(versions, selected, attrs) {
  return h('select', attrs, versions.map(v => h('option', {value: v.version, selected: v.version === selected},
    `v${v.version}${v.branch ? ' (' + v.branch + ')' : ''}`)));
}

// Each alias with a select of versions and a Move button. The server decides who may move what
// (writer, admin for protected ones); a refusal is shown as its message and nothing changes.
function aliasesBox(page, m) {
  const errors = h('div');
  const rows = (m.aliases || []).map(a => {
    const select = versionSelect(m.versions || [], a.version, {'data-test': 'alias-select'});
    const button = h('button', {'data-test': 'alias-move'}, 'Move');
    button.onclick = () => moveAlias(page, m.name, a.name, Number(select.value), button, errors);
    return h('tr', {'data-test': 'alias', 'data-alias': a.name},
      td(h('b', {}, a.name), a.protected ? badge('protected', 'protected') : null),
      num('v' + a.version, {'data-test': 'alias-version', 'data-version': a.version}),
      td(a.updated_by || DASH), td(fmtTime(a.updated_at)), td(h('span', {class: 'inline'}, select, button)));
  });
  const newName = h('input', {type: 'text', placeholder: 'new alias', size: 12, 'data-test': 'alias-new-name'});
  const newSelect = versionSelect(m.versions || [], (m.versions || [])[0]?.version, {'data-test': 'alias-new-select'});
  const create = h('button', {'data-test': 'alias-create'}, 'Set');
  create.onclick = () => newName.value.trim() &&
    moveAlias(page, m.name, newName.value.trim(), Number(newSelect.value), create, errors);
  return [rows.length ? table(['alias', '#version', 'by', 'updated', 'move to'], rows, {'data-test': 'aliases'})
    : muted('No aliases.'), h('div', {class: 'toolbar'}, newName, newSelect, create), errors];
}

async function moveAlias(page, model, alias, version, button, errors) {
  errors.replaceChildren();
  button.disabled = true;
  try {
    await api(`/ui/api/models/${enc(model)}/aliases/${enc(alias)}`, {method: 'PUT', body: {version}});
    if (page.alive) route();  // re-read everything the move changed: aliases, badges, history, lineage
  } catch (e) {
    if (e.status === 401) return showLogin();
    put(errors, errorBox(`Could not move ${alias}: ${e.message}`));
    button.disabled = false;
  }
}

function aliasHistory(history) {
  if (!history.length) return muted('No alias moves yet.');
  return table(['#seq', 'alias', 'from', 'to', 'by', 'at'], history.slice().reverse().map(x =>
    h('tr', {'data-test': 'alias-move-history'}, num(fmtInt(x.seq)), td(x.alias),
      td(x.from === null || x.from === undefined ? DASH : 'v' + x.from), td('v' + x.to), td(x.by || DASH),
      td(fmtTime(x.at)))));
}

function diffForm(versions) {
  if (versions.length < 2) return muted('A diff needs two versions.');
  const pick = (test, idx) => h('select', {'data-test': test}, versions.map((v, i) =>
    h('option', {value: v.uri, selected: i === idx}, `v${v.version}`)));
  const a = pick('diff-a', 1);
  const b = pick('diff-b', 0);
  return h('div', {class: 'toolbar'}, a, '→', b, h('button', {'data-test': 'diff-go',
    onclick: () => go(`#/diff?a=${enc(a.value)}&b=${enc(b.value)}`)}, 'Diff'));
}

// Lineage: versions as boxes ("v3", top-1, alias badges), datasets as rounded pills, versions of
// other models dashed; edges run from parent or dataset to child.
function lineageGraph(lineage, model) {
  const nodes = (lineage.nodes || []).map(n => lineageNode(n, model));
  const edges = (lineage.edges || []).map(e => ({from: e.from, to: e.to,
    cls: e.kind === 'data' || e.kind === 'run' ? e.kind : ''}));
  return [drawDag({nodes, edges, rankdir: 'LR', test: 'lineage'}),
    h('p', {class: 'legend small muted'}, 'boxes: versions · pills: datasets · green: the run or checkpoints ' +
      'a version was registered from · dashed: outside this model · dashed edges: training data')];
}

// The last two parts of a long path, which tell runs and datasets apart.
function tail(path) {
  const parts = String(path).split('/').filter(Boolean);
  return parts.length > 2 ? '…/' + parts.slice(-2).join('/') : String(path);
}

function lineageNode(n, model) {
  if (n.kind === 'version') return versionNode(n);
  const label = n.kind === 'dataset' || n.kind === 'run' ? tail(n.label || n.id) : shortUri(n.label || n.id, model);
  const width = textWidth(label) + 28;
  return {id: n.id, width, height: 34, attrs: {class: `node ${n.kind}`, 'data-kind': n.kind},
    draw: g => g.append(s('title', {}, n.id),
      s('rect', {width, height: 34, rx: n.kind === 'dataset' ? 17 : 4}),
      svgText(width / 2, 21, label, 'center'))};
}

function versionNode(n) {
  const title = `v${n.version}${n.branch && n.branch !== 'main' ? ' · ' + n.branch : ''}`;
  const sub = isNum(n.top1) ? `top-1 ${fmtAcc(n.top1)}` : n.recipe_op || '';
  const aliases = n.aliases || [];
  const aliasW = aliases.map(a => textWidth(a, '10px system-ui, sans-serif') + 12);
  const width = Math.max(84, textWidth(title, 'bold ' + DAG_FONT) + 24, textWidth(sub) + 24,
    aliasW.reduce((a, b) => a + b + 4, 8));
  const height = aliases.length ? 64 : 44;
  return {id: n.id, width, height, attrs: {class: 'node version', 'data-kind': 'version'},
    draw: g => {
      g.append(s('title', {}, `${n.id}${n.recipe_op ? ' (' + n.recipe_op + ')' : ''}`),
        s('rect', {width, height, rx: 4}),
        svgText(width / 2, 17, title, 'center bold'),
        svgText(width / 2, 33, sub, 'center small'));
      let x = (width - aliasW.reduce((a, b) => a + b + 4, -4)) / 2;
      aliases.forEach((a, i) => {
        g.append(s('g', {class: 'alias-badge', transform: `translate(${x},42)`},
          s('rect', {width: aliasW[i], height: 15, rx: 7}), svgText(aliasW[i] / 2, 11, a, 'center tiny')));
        x += aliasW[i] + 4;
      });
    }};
}

/* ------------------------------------------------------------------ #/diff */

async function pageDiff(page, a, b) {
  const root = page.root;
  root.append(h('h1', {}, 'Diff'));
  if (!a || !b) {
    root.append(muted('Pick two versions on a model page.'));
    return;
  }
  const d = await api(`/ui/api/diff?a=${enc(a)}&b=${enc(b)}`);
  const counts = d.counts || {};
  root.append(h('p', {class: 'mono'}, d.a || a, ' → ', d.b || b),
    h('div', {class: 'stats'}, ['changed', 'shape-changed', 'added', 'removed', 'unchanged'].map(k =>
      h('div', {class: 'stat'}, h('div', {class: 'stat-label'}, k.replace('-', ' ') + ' tensors'),
        h('div', {class: 'stat-value', 'data-test': 'diff-count', 'data-kind': k}, fmtInt(counts[k] ?? 0))))),
    h('div', {class: 'two-col'},
      section('Config changes', changesTable(d.config || [], 'diff-config')),
      section('Metric changes', changesTable(d.metrics || [], 'diff-metric', true))),
    section('Tensors', tensorsTable(d.tensors || [])));
}

// Metrics with 4 decimals like everywhere else; config values exactly as written (1e-5 stays 1e-5).
function showValue(v, metric) {
  if (v === null || v === undefined) return h('span', {class: 'muted'}, 'absent');
  if (metric && isNum(v) && !Number.isInteger(v)) return v.toFixed(4);
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

function changesTable(list, test, metric) {
  if (!list.length) return muted('No changes.');
  return table(['key', 'a', 'b'], list.map(c => h('tr', {'data-test': test, 'data-key': c.key},
    td(c.key, {class: 'mono'}), td(showValue(c.from, metric), {class: 'old'}), td(showValue(c.to, metric), {class: 'new'}))));
}

// Tensors: the changed ones first, largest relative L2 first; unchanged ones behind a switch since a
// fine-tune leaves most of a network alone.
function tensorsTable(tensors) {
  const order = t => (t.change === 'unchanged' ? 1 : 0);
  const sorted = tensors.slice().sort((x, y) => order(x) - order(y) || (y.relative_l2 || 0) - (x.relative_l2 || 0));
  const unchanged = sorted.filter(t => t.change === 'unchanged').length;
  const rows = sorted.map(t => h('tr', {'data-test': 'diff-tensor', 'data-change': t.change,
    hidden: t.change === 'unchanged' && unchanged !== sorted.length},
  td(t.name, {class: 'mono'}), td(badge(t.change, 'change-' + t.change)), num(fmtFixed(t.relative_l2, 6))));
  const grid = table(['tensor', 'change', '#relative L2'], rows);
  const toggle = h('label', {class: 'small'}, h('input', {type: 'checkbox', onchange: e => {
    for (const r of grid.tBodies[0].rows) if (r.dataset.change === 'unchanged') r.hidden = !e.target.checked;
  }}), ` show ${unchanged} unchanged`);
  return [unchanged ? toggle : null, grid];
}

/* ------------------------------------------------------------------ #/pipelines */

const stateKind = st => ({succeeded: 'ok', cached: 'cached', failed: 'bad', running: 'run', retrying: 'run',
  interrupted: 'warn'}[st] || 'grey');

function runDuration(r) {
  if (!isNum(r.created_ms)) return DASH;
  const end = isNum(r.finished_ms) && r.finished_ms > 0 ? r.finished_ms : Date.now();
  return fmtDuration((end - r.created_ms) / 1000);
}

async function pagePipelines(page) {
  const body = h('div');
  page.root.append(h('h1', {}, 'Pipelines'), body);
  const render = async () => {
    const {runs} = await api('/ui/api/pipelines');
    if (!page.alive) return false;
    put(body, runs.length
      ? table(['run', 'pipeline', 'state', '#tasks done', 'created', '#duration'], runs.map(pipelineRow),
        {'data-test': 'pipelines-table'})
      : muted('No pipeline runs.'));
    return runs.some(r => r.state === 'running');
  };
  // Only a running pipeline changes the list, so poll only while one runs.
  if (await render()) page.poll(POLL_MS, render);
}

function pipelineRow(r) {
  return h('tr', {'data-test': 'pipeline-row', 'data-id': r.id},
    td(h('a', {href: `#/pipelines/${enc(r.id)}`}, r.id)), td(r.pipeline),
    td(badge(r.state, stateKind(r.state)), r.failed_task ? h('span', {class: 'small muted'}, ` at ${r.failed_task}`) : null),
    barCell(`${fmtInt(r.done)} / ${fmtInt(r.tasks)}`, r.tasks ? r.done / r.tasks : 0),
    td(fmtTime(r.created_ms)), num(runDuration(r)));
}

async function pagePipeline(page, id) {
  const root = page.root;
  // The note outlives each refresh, so "retry started" stays after the buttons are redrawn.
  const view = {selected: null, pollUntil: 0, note: h('span', {class: 'small muted', 'data-test': 'action-note'})};
  const head = h('div');
  const graph = h('div');
  const tasks = h('div');
  const log = h('div');
  const actions = h('div');
  root.append(head, actions, section('Tasks', muted('Click a task to see its log.'), graph), log, tasks);

  const refresh = async () => {
    const run = await api(`/ui/api/pipelines/${enc(id)}`);
    if (!page.alive) return false;
    put(head, h('h1', {}, run.id, ' ', badge(run.state, stateKind(run.state), {'data-test': 'pipeline-state'})),
      h('p', {class: 'muted'}, `${run.pipeline} · created ${fmtTime(run.created_ms)} · ${runDuration(run)}`,
        run.failed_task ? ` · failed at ${run.failed_task}` : ''));
    put(actions, pipelineActions(page, run, view, refresh));
    put(graph, taskGraph(run.tasks || [], view, name => showLog(page, id, name, view, log)));
    put(tasks, section('Task details', taskTable(run.tasks || [])));
    const selected = (run.tasks || []).find(t => t.name === view.selected);
    if (selected && /running|retrying/.test(selected.state)) await showLog(page, id, selected.name, view, log);
    return run.state === 'running' || Date.now() < view.pollUntil;
  };
  if (await refresh()) startPipelinePoll(page, refresh, view);
}

function startPipelinePoll(page, refresh, view) {
  if (view.polling) return;
  view.polling = true;
  page.poll(POLL_MS, async () => {
    const again = await refresh();
    view.polling = again;
    return again;
  });
}

function pipelineActions(page, run, view, refresh) {
  const note = view.note;
  const post = async (what, button) => {
    button.disabled = true;
    note.replaceChildren();
    try {
      await api(`/ui/api/pipelines/${enc(run.id)}/${what}`, {method: 'POST'});
      note.textContent = what === 'retry' ? 'retry started' : 'cancel sent';
      // A retry starts in the background: keep polling a while so its first states show.
      view.pollUntil = Date.now() + 15000;
      if (await refresh()) startPipelinePoll(page, refresh, view);
    } catch (e) {
      if (e.status === 401) return showLogin();
      put(note, errorBox(e.message));
      button.disabled = false;
    }
  };
  const running = run.state === 'running';
  const retry = h('button', {'data-test': 'pipeline-retry', disabled: running || run.state === 'succeeded'}, 'Retry');
  const cancel = h('button', {'data-test': 'pipeline-cancel', class: 'danger', disabled: !running}, 'Cancel');
  retry.onclick = () => post('retry', retry);
  cancel.onclick = () => post('cancel', cancel);
  return h('div', {class: 'toolbar'}, retry, cancel, note);
}

function taskGraph(tasks, view, onPick) {
  const nodes = tasks.map(t => {
    const line2 = `${t.state} · ${fmtDuration(t.duration_s)}`;
    const line3 = `${t.attempts || 0} attempt${t.attempts === 1 ? '' : 's'}` +
      (isNum(t.exit_code) && t.exit_code !== 0 ? ` · exit ${t.exit_code}` : '');
    const width = Math.max(120, textWidth(t.name, 'bold ' + DAG_FONT) + 24, textWidth(line2) + 24, textWidth(line3) + 24);
    return {id: t.name, width, height: 58,
      attrs: {class: `node task state-${t.state}${view.selected === t.name ? ' selected' : ''}`,
        'data-test': 'task', 'data-task': t.name, 'data-state': t.state, tabindex: 0, role: 'button'},
      draw: g => {
        g.append(s('title', {}, t.reason ? `${t.name}: ${t.reason}` : t.name), s('rect', {width, height: 58, rx: 5}),
          svgText(width / 2, 18, t.name, 'center bold'), svgText(width / 2, 34, line2, 'center small'),
          svgText(width / 2, 49, line3, 'center small' + (t.attempts > 1 ? ' warn' : '')));
        g.addEventListener('click', () => onPick(t.name));
        g.addEventListener('keydown', e => e.key === 'Enter' && onPick(t.name));
      }};
  });
  const edges = tasks.flatMap(t => (t.depends_on || []).map(dep => ({from: dep, to: t.name})));
  return drawDag({nodes, edges, rankdir: 'LR', test: 'pipeline-dag'});
}

async function showLog(page, id, task, view, box) {
  view.selected = task;
  for (const g of document.querySelectorAll('[data-test="task"]')) g.classList.toggle('selected', g.dataset.task === task);
  let text;
  try {
    text = await api(`/ui/api/pipelines/${enc(id)}/logs/${enc(task)}`, {as: 'text'});
  } catch (e) {
    if (e.status === 401) return showLogin();
    text = null;
    if (page.alive && view.selected === task) put(box, section(`Log of ${task}`, errorBox(e.message)));
  }
  if (!page.alive || view.selected !== task || text === null) return;
  const pre = h('pre', {class: 'log', 'data-test': 'task-log', 'data-task': task}, text || '(empty log)');
  put(box, section(`Log of ${task}`, pre));
  pre.scrollTop = pre.scrollHeight;  // the end of a log is where failures are
}

function taskTable(tasks) {
  return table(['task', 'state', '#attempts', '#exit', 'reason', 'started', '#duration', 'depends on'],
    tasks.map(t => h('tr', {'data-test': 'task-row', 'data-task': t.name}, td(t.name),
      td(badge(t.state, stateKind(t.state))), num(fmtInt(t.attempts)), num(fmtInt(t.exit_code)),
      td(t.reason || '', {class: 'small'}), td(fmtTime(t.started_ms)), num(fmtDuration(t.duration_s)),
      td((t.depends_on || []).join(', ')))));
}

/* ------------------------------------------------------------------ #/jobs */

// The scheduler daemon's /v1/jobs, /v1/queues and /v1/nodes, as `reel jobs` and `reel nodes` show them.
async function pageJobs(page) {
  const root = page.root;
  root.append(h('h1', {}, 'Jobs'));
  const body = h('div');
  root.append(body);
  const render = async () => {
    let data;
    try {
      data = await api('/ui/api/jobs');
    } catch (e) {
      if (e.status !== 404) throw e;
      put(body, h('div', {class: 'notice', 'data-test': 'no-scheduler'},
        'No scheduler configured: start `reel ui` with the scheduler\'s address to see jobs, queues and nodes.'));
      return false;
    }
    if (!page.alive) return false;
    put(body,
      section('Jobs', jobsTable(data.jobs || [], jobCancel(page, render))),
      h('div', {class: 'two-col'},
        section('Queues: quota use', queuesTable(data.queues || [])),
        section('Nodes: allocations', nodesTable(data.nodes || []))));
    return true;
  };
  if (await render()) page.poll(5000, render);
}

const jobStateKind = st => ({succeeded: 'ok', running: 'run', pending: 'grey', failed: 'bad', cancelled: 'grey',
  preempted: 'run'}[st] || 'grey');

function jobsTable(jobs, cancel) {
  if (!jobs.length) return h('div', {'data-test': 'jobs-table'}, muted('No jobs.'));
  const rows = jobs.map(j => h('tr', {'data-test': 'jobs-row', 'data-job': j.id},
    td(j.id, {class: 'mono'}), td(j.name || DASH), td(badge(j.state, jobStateKind(j.state))), td(j.queue),
    num(fmtInt(j.priority)), td(workersText(j)), td((j.nodes || []).join(', ') || DASH),
    num(fmtInt(j.attempts)), num(fmtInt(j.preemptions)), td(fmtTime(j.submitted_ms)),
    td(j.reason || '', {class: 'small'}), td(cancel(j))));
  return table(['id', 'name', 'state', 'queue', '#priority', 'workers', 'nodes', '#attempts', '#preempted',
    'submitted', 'reason', ''], rows, {'data-test': 'jobs-table'});
}

function workersText(j) {
  const n = j.workers === j.max_workers ? String(j.workers) : `${j.workers}-${j.max_workers}`;
  const r = j.resources || {};
  const parts = [`cpu ${r.cpu}`, r.memory && r.memory !== '0' ? `memory ${r.memory}` : null,
    r.gpu ? `gpu ${r.gpu}` : null].filter(Boolean);
  return `${n} × ${parts.join(', ')}`;
}

// "cpu 2, memory 4Gi, gpu 1" (the daemon's ResourcesText) as numbers: cpu in cores, memory in
// bytes, gpu in devices.
function parseResources(text) {
  const units = {Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40};
  const out = {};
  for (const part of String(text || '').split(',')) {
    const m = part.trim().match(/^(cpu|memory|gpu)\s+([0-9.]+)(m|Ki|Mi|Gi|Ti)?$/);
    if (!m) continue;
    const v = parseFloat(m[2]);
    out[m[1]] = m[3] === 'm' ? v / 1000 : m[3] ? v * units[m[3]] : v;
  }
  return out;
}

const resourceText = (kind, v) => (kind === 'memory' ? fmtBytes(v) : String(+v.toFixed(3)));

// One bar per resource: `used` of `total` (a bar past its end is borrowing beyond the quota).
function useBars(used, total) {
  return ['cpu', 'memory', 'gpu'].filter(k => total[k] > 0).map(k => {
    const pct = Math.max(0, Math.min(1, (used[k] || 0) / total[k])) * 100;
    return h('div', {class: 'use bar-cell', 'data-test': 'use', 'data-resource': k},
      h('span', {class: 'bar', style: {width: pct.toFixed(1) + '%'}}),
      h('span', {class: 'bar-text'}, `${k} ${resourceText(k, used[k] || 0)} / ${resourceText(k, total[k])}`));
  });
}

function queuesTable(queues) {
  if (!queues.length) return h('div', {'data-test': 'queues-table'}, muted('No queues.'));
  const rows = queues.map(q => h('tr', {'data-test': 'queues-row', 'data-queue': q.name},
    td(q.name), td(useBars(parseResources(q.used), parseResources(q.quota))),
    td(q.borrowing_limit || DASH, {class: 'small'}), num(fmtInt(q.weight))));
  return table(['queue', 'used / quota', 'may borrow', '#weight'], rows, {'data-test': 'queues-table'});
}

function nodesTable(nodes) {
  if (!nodes.length) return h('div', {'data-test': 'nodes-table'}, muted('No nodes.'));
  const rows = nodes.map(n => {
    const total = parseResources(`cpu ${n.cpu}, memory ${n.memory}, gpu ${n.gpu}`);
    const free = n.free || {};
    const left = parseResources(`cpu ${free.cpu}, memory ${free.memory}, gpu ${free.gpu}`);
    const used = Object.fromEntries(Object.keys(total).map(k => [k, total[k] - (left[k] || 0)]));
    return h('tr', {'data-test': 'nodes-row', 'data-node': n.name},
      td(n.name), td(useBars(used, total)),
      td([n.spot ? badge('spot', 'grey') : null, n.reclaimed ? badge('reclaimed', 'bad') : null]),
      td(Object.entries(n.labels || {}).map(([k, v]) => `${k}=${v}`).join(', ') || DASH, {class: 'small'}));
  });
  return table(['node', 'allocated / capacity', '', 'labels'], rows, {'data-test': 'nodes-table'});
}

function jobCancel(page, rerender) {
  return job => {
    const id = job.id ?? job.job_id ?? job.name;
    const st = String(job.state ?? job.status ?? '').toLowerCase();
    if (id === undefined || !/^(running|pending|queued|waiting)$/.test(st)) return null;
    const button = h('button', {class: 'danger small', 'data-test': 'job-cancel', 'data-job': id}, 'Cancel');
    button.onclick = async () => {
      button.disabled = true;
      try {
        await api(`/ui/api/jobs/${enc(id)}/cancel`, {method: 'POST'});
        await rerender();
      } catch (e) {
        if (e.status === 401) return showLogin();
        button.replaceWith(errorBox(e.message));
      }
    };
    return button;
  };
}

/* ------------------------------------------------------------------ #/serving */

const SERVING_CHARTS = [
  {title: 'Requests / s', series: [{key: 'requests_per_s', label: 'req/s'}]},
  {title: 'Latency (ms)', series: [{key: 'p50_ms', label: 'p50'}, {key: 'p99_ms', label: 'p99'}]},
  {title: 'Replicas', series: [{key: 'replicas', label: 'replicas'}]},
  {title: 'Queue depth', series: [{key: 'queue', label: 'queue'}]},
];

async function pageServing(page) {
  const root = page.root;
  root.append(h('h1', {}, 'Serving'));
  const body = h('div');
  root.append(body);
  let views = null;
  const update = async () => {
    const {servers} = await api('/ui/api/serving');
    if (!page.alive) return false;
    const urls = servers.map(x => x.url).join(' ');
    if (!views || views.urls !== urls) {
      // The set of servers changed (or first load): rebuild; otherwise only feed new data in.
      if (views) page.dropCharts(views.charts);
      views = buildServing(page, body, servers);
      views.urls = urls;
    } else {
      servers.forEach((srv, i) => updateServer(views.list[i], srv));
    }
    return true;
  };
  await update();
  page.poll(POLL_MS, update);
}

function buildServing(page, body, servers) {
  body.replaceChildren();
  if (!servers.length) body.append(muted('No serving endpoints configured (`reel ui --serve URL`).'));
  const charts = [];
  const list = servers.map(srv => {
    const status = h('div', {class: 'toolbar'});
    const models = h('div');
    const grid = h('div', {class: 'charts'});
    body.append(h('section', {class: 'card', 'data-test': 'server', 'data-url': srv.url},
      h('h2', {class: 'mono'}, srv.url), status, models, grid));
    const view = {status, models, charts: []};
    for (const c of SERVING_CHARTS) {
      const holder = chartBox();
      grid.append(holder);
      const t = (srv.series || {}).t || [];
      const chart = lineChart(page, holder, {title: c.title, xLabel: 'time', time: isEpochSeconds(t) || !t.length,
        data: servingData(srv, c), series: c.series});
      chart.spec = c;
      view.charts.push(chart);
      charts.push(chart);
    }
    updateServer(view, srv);
    return view;
  });
  return {list, charts};
}

function servingData(srv, spec) {
  const sr = srv.series || {};
  return [sr.t || [], ...spec.series.map(x => sr[x.key] || [])];
}

function updateServer(view, srv) {
  put(view.status,
    badge(srv.up ? 'up' : 'down', srv.up ? 'ok' : 'bad', {'data-test': 'server-up'}),
    h('span', {}, `replicas: ${fmtInt(srv.replicas)}`),
    srv.error ? h('span', {class: 'error-text'}, srv.error) : null);
  const models = srv.models || [];
  put(view.models, models.length
    ? table(['model', '#version', '#req/s', '#p50 ms', '#p99 ms', '#mean batch', '#queue', '#ok', '#failed'],
      models.map(m => h('tr', {'data-test': 'serving-model', 'data-model': m.name},
        td(m.name), num(m.version || DASH), num(fmtNum(m.requests_per_s, 1), {'data-test': 'serving-rps'}),
        num(fmtNum(m.p50_ms, 1)), num(fmtNum(m.p99_ms, 1)), num(fmtNum(m.mean_batch, 2)),
        num(fmtInt(m.queue)), num(fmtInt(m.success)), num(fmtInt(m.failure)))))
    : muted('No models loaded.'));
  for (const c of view.charts) c.setData(servingData(srv, c.spec));
}

/* ------------------------------------------------------------------ start */

window.addEventListener('hashchange', route);
window.addEventListener('storage', e => {
  // Signing in or out in another tab changes the token here too.
  if (e.key === TOKEN_KEY) refreshWhoami().then(route);
});

refreshWhoami().then(() => {
  if (location.hash) route();
  else location.replace('#/runs');  // fires hashchange, which routes
});
