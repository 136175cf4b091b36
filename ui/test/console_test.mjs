// Browser test of `reel ui`: drives headless Chromium (playwright-core) against a running server,
// checks what each page shows against the expectations written by the shell test, and saves
// screenshots.
//
//   REEL_UI_URL     the server, e.g. http://127.0.0.1:34567
//   REEL_UI_EXPECT  JSON file of expectations (every key optional: its checks are skipped)
//   REEL_UI_SHOTS   folder for full-page PNGs (optional)
//   CHROMIUM        the browser binary (default /usr/bin/chromium)
//
// Prints `ok - what` / `not ok - what: why` per check and timings; exits 1 if any check failed.
// The page marks a rendered page with body[data-ready="1"][data-route="<location.hash>"].

import fs from 'node:fs';
import path from 'node:path';
import {chromium} from 'playwright-core';

const BASE = (process.env.REEL_UI_URL || 'http://127.0.0.1:34567').replace(/\/+$/, '');
const EXPECT = process.env.REEL_UI_EXPECT ? JSON.parse(fs.readFileSync(process.env.REEL_UI_EXPECT, 'utf8')) : {};
const SHOTS = process.env.REEL_UI_SHOTS || '';
const CHECK_MS = 10000;
const WAIT_MS = CHECK_MS - 1500;  // browser waits give up first, with a message naming what they waited for
const VIEWPORT = {width: 1280, height: 800};

let failed = 0;
let passed = 0;
const pageErrors = [];

const oneLine = s => String(s).split('\n')[0].slice(0, 300);
const enc = encodeURIComponent;
const acc = v => (v === null || v === undefined ? '—' : Number(v).toFixed(4));

// Runs one check with its own deadline so a missing element can never hang the whole test.
async function check(what, fn, ms = CHECK_MS) {
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  try {
    await Promise.race([fn(), deadline]);
    passed++;
    console.log(`ok - ${what}`);
  } catch (e) {
    failed++;
    console.log(`not ok - ${what}: ${oneLine(e.message || e)}`);
  } finally {
    clearTimeout(timer);
  }
}

function assert(cond, message) {
  if (!cond) throw new Error(message);
}

function assertEqual(got, want, what) {
  if (String(got) !== String(want)) throw new Error(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}

// A full load of BASE/<hash>, waiting until the page says it rendered its data; returns the ms.
async function open(page, hash) {
  const start = Date.now();
  await page.goto('about:blank');
  await page.goto(`${BASE}/${hash}`);
  await waitReady(page);
  return Date.now() - start;
}

async function reload(page) {
  await page.reload();
  await waitReady(page);
}

function waitReady(page) {
  return page.waitForFunction(() => document.body.dataset.ready === '1' &&
    document.body.dataset.route === location.hash, null, {timeout: WAIT_MS});
}

async function shot(page, name) {
  if (!SHOTS) return;
  await page.screenshot({path: path.join(SHOTS, name), fullPage: true});
}

async function newPage(browser, token) {
  const context = await browser.newContext({viewport: VIEWPORT});
  if (token) {
    // Before any script of the page runs, so its first API call already carries the token.
    await context.addInitScript(t => {
      try { localStorage.setItem('reel.token', t); } catch (_) { /* about:blank has no storage */ }
    }, token);
  }
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT_MS);
  page.on('pageerror', e => pageErrors.push(oneLine(e.message)));
  return page;
}

/* ------------------------------------------------------------------ reading the page */

function readRunRows(page) {
  return page.$$eval('[data-test="run-row"]', rows => rows.map(r => ({
    name: r.dataset.run,
    step: r.querySelector('[data-test="run-step"]').textContent.trim(),
    loss: r.querySelector('[data-test="run-loss"]').textContent.trim(),
    top1: r.querySelector('[data-test="run-top1"]').textContent.trim(),
  })));
}

function readAlias(page, alias) {
  return page.$$eval('[data-test="alias"]', (rows, name) => {
    const row = rows.find(r => r.dataset.alias === name);
    return row ? row.querySelector('[data-test="alias-version"]').dataset.version : null;
  }, alias);
}

async function aliasRow(page, alias) {
  const rows = await page.$$('[data-test="alias"]');
  for (const row of rows) if (await row.getAttribute('data-alias') === alias) return row;
  throw new Error(`no alias row ${alias}`);
}

async function moveAlias(page, alias, version) {
  const row = await aliasRow(page, alias);
  await (await row.$('[data-test="alias-select"]')).selectOption(String(version));
  await (await row.$('[data-test="alias-move"]')).click();
}

/* ------------------------------------------------------------------ checks */

async function checkAuth(browser) {
  await check('API refuses a request without a token (401)', async () => {
    const res = await fetch(`${BASE}/ui/api/runs`);
    assertEqual(res.status, 401, 'status');
  });
  const page = await newPage(browser, null);
  await check('without a token the page asks for one', async () => {
    await open(page, '#/runs');
    await page.waitForSelector('[data-test="login"]', {state: 'visible'});
    assertEqual(await page.locator('[data-test="run-row"]').count(), 0, 'run rows shown');
  });
  await page.context().close();
}

async function checkReader(browser) {
  const page = await newPage(browser, EXPECT.token_reader);
  if (EXPECT.runs) await checkRunsList(page, 'reader');
  const al = EXPECT.alias;
  if (EXPECT.model && al) {
    await check('a reader moving an alias is refused (403 shown) and the alias stays', async () => {
      await open(page, `#/models/${enc(EXPECT.model)}`);
      const before = await readAlias(page, al.name);
      assert(before !== null, `alias ${al.name} not shown`);
      await moveAlias(page, al.name, String(before) === String(al.to) ? al.from : al.to);
      const error = await page.waitForSelector('[data-test="error"]', {state: 'visible'});
      assert((await error.textContent()).trim().length > 0, 'empty error message');
      await reload(page);
      assertEqual(await readAlias(page, al.name), before, `alias ${al.name} after the refused move`);
    });
  }
  await page.context().close();
}

async function checkRunsList(page, who) {
  await check(`runs page lists every expected run with its last step, loss and top-1 (${who})`, async () => {
    await open(page, '#/runs');
    const rows = new Map((await readRunRows(page)).map(r => [r.name, r]));
    for (const want of EXPECT.runs) {
      const got = rows.get(want.name);
      assert(got, `run ${want.name} not listed`);
      assertEqual(got.step, want.last_step, `${want.name} last step`);
      if ('loss' in want) assertEqual(got.loss, acc(want.loss), `${want.name} loss`);
      if ('top1' in want) assertEqual(got.top1, acc(want.top1), `${want.name} top-1`);
    }
  });
}

async function checkRunPage(page) {
  await check(`run page of ${EXPECT.run} shows the evaluation and confusion matrix`, async () => {
    await open(page, `#/runs/${enc(EXPECT.run)}`);
    await page.waitForSelector('.uplot');
    const ev = EXPECT.eval;
    if (!ev) return;
    if ('top1' in ev) assertEqual((await page.textContent('[data-test="eval-top1"]')).trim(), acc(ev.top1), 'top-1');
    const shown = await page.$$eval('[data-test="confusion"] td[data-row]', cells => cells.map(c =>
      [Number(c.dataset.row), Number(c.dataset.col), c.textContent.trim()]));
    const matrix = ev.confusion || [];
    const want = matrix.reduce((n, row) => n + row.length, 0);
    assertEqual(shown.length, want, 'confusion cells');
    for (const [i, j, text] of shown) assertEqual(text, matrix[i][j], `confusion[${i}][${j}]`);
    if (ev.class_names) {
      const rows = await page.$$eval('[data-test="confusion"] th.row-label', ths => ths.map(t => t.textContent.trim()));
      const cols = await page.$$eval('[data-test="confusion"] th.col-label', ths => ths.map(t => t.textContent.trim()));
      assertEqual(rows.join('|'), ev.class_names.join('|'), 'row class names');
      assertEqual(cols.join('|'), ev.class_names.join('|'), 'column class names');
    }
  });
  await shot(page, 'run.png');
}

async function checkCompare(page, names) {
  await check(`compare page overlays ${names.length} runs`, async () => {
    await open(page, `#/compare?runs=${names.map(enc).join(',')}`);
    await page.waitForSelector('.uplot');
    // The first chart is the loss chart: its legend names one series per run (after the x series).
    const labels = await page.$eval('.uplot', u => [...u.querySelectorAll('.u-legend .u-series .u-label')]
      .map(l => l.textContent.trim()));
    for (const n of names) assert(labels.includes(n), `legend lacks ${n} (has ${labels.join(', ')})`);
    assertEqual(labels.length - 1, names.length, 'series in the loss chart');
  });
  await shot(page, 'compare.png');
}

async function checkScale(page) {
  const sc = EXPECT.scale;
  let first = null;
  await check(`runs page lists ${sc.runs}+ runs`, async () => {
    const ms = await open(page, '#/runs');
    const names = (await readRunRows(page)).map(r => r.name);
    const scaled = names.filter(n => n.startsWith(sc.prefix));
    console.log(`load runs page with ${names.length} runs: ${ms} ms`);
    assert(names.length >= sc.runs, `only ${names.length} rows`);
    assert(scaled.length >= sc.runs, `only ${scaled.length} runs named ${sc.prefix}*`);
    first = scaled.sort()[0];
  });
  await shot(page, 'runs.png');
  if (!first) return;
  await check(`run page with ${sc.points} points renders`, async () => {
    const ms = await open(page, `#/runs/${enc(first)}`);
    await page.waitForSelector('.uplot canvas');
    const total = await page.getAttribute('[data-test="run-points"]', 'data-total');
    console.log(`load run page with ${total} points: ${ms} ms`);
    assertEqual(total, sc.points, 'total points');
  });
}

async function checkModel(page) {
  const model = EXPECT.model;
  await check('models page lists the model', async () => {
    await open(page, '#/models');
    await page.waitForSelector(`[data-test="model-row"][data-model="${model}"]`);
  });
  await shot(page, 'models.png');
  if (EXPECT.versions) {
    await check(`model page lists versions ${EXPECT.versions.join(', ')}`, async () => {
      await open(page, `#/models/${enc(model)}`);
      const shown = await page.$$eval('[data-test="version-row"]', rows => rows.map(r => r.dataset.version));
      for (const v of EXPECT.versions) assert(shown.includes(String(v)), `version ${v} missing (shown ${shown})`);
    });
  }
  const al = EXPECT.alias;
  if (al) {
    await check(`moving alias ${al.name} from v${al.from} to v${al.to}`, async () => {
      await open(page, `#/models/${enc(model)}`);
      await moveAlias(page, al.name, al.to);
      await page.waitForFunction(([name, to]) => [...document.querySelectorAll('[data-test="alias"]')]
        .some(r => r.dataset.alias === name && r.querySelector('[data-test="alias-version"]').dataset.version === to),
      [al.name, String(al.to)]);
      await reload(page);
      assertEqual(await readAlias(page, al.name), al.to, `alias ${al.name} after reload`);
    });
  }
  if (EXPECT.lineage) await checkLineage(page, model);
  await shot(page, 'model.png');
}

async function checkLineage(page, model) {
  await check('lineage graph has every expected node and edge', async () => {
    if (!page.url().includes(`#/models/${enc(model)}`)) await open(page, `#/models/${enc(model)}`);
    const graph = await page.$eval('[data-test="lineage"]', svg => ({
      nodes: [...svg.querySelectorAll('[data-node]')].map(n => n.dataset.node),
      edges: [...svg.querySelectorAll('[data-test="edge"]')].map(e => `${e.dataset.from} -> ${e.dataset.to}`),
    }));
    for (const n of EXPECT.lineage.nodes || []) assert(graph.nodes.includes(n), `node ${n} missing`);
    for (const [a, b] of EXPECT.lineage.edges || []) assert(graph.edges.includes(`${a} -> ${b}`), `edge ${a} -> ${b} missing`);
  });
}

async function checkDiff(page) {
  const d = EXPECT.diff;
  await check(`diff ${d.a} -> ${d.b} shows ${d.changed} changed tensors`, async () => {
    await open(page, `#/diff?a=${enc(d.a)}&b=${enc(d.b)}`);
    const text = await page.textContent('[data-test="diff-count"][data-kind="changed"]');
    assertEqual(text.trim(), d.changed, 'changed');
  });
  await shot(page, 'diff.png');
}

async function checkPipeline(page) {
  const p = EXPECT.pipeline;
  await check(`pipeline ${p.id} shows each task's state`, async () => {
    await open(page, `#/pipelines/${enc(p.id)}`);
    const states = Object.fromEntries(await page.$$eval('[data-test="task"]', gs => gs.map(g =>
      [g.dataset.task, g.dataset.state])));
    for (const [task, state] of Object.entries(p.tasks || {})) assertEqual(states[task], state, `task ${task}`);
  });
  if (p.failed_task) {
    await check(`clicking ${p.failed_task} shows its log`, async () => {
      await page.click(`[data-test="task"][data-task="${p.failed_task}"]`);
      const log = await page.waitForSelector(`[data-test="task-log"][data-task="${p.failed_task}"]`);
      if (p.log_contains) {
        const text = await log.textContent();
        assert(text.includes(p.log_contains), `log lacks ${JSON.stringify(p.log_contains)}`);
      }
    });
  }
  await shot(page, 'pipeline.png');
}

async function checkDataset(page) {
  const ds = EXPECT.dataset || {};
  let index = null;
  await check('datasets page lists the dataset', async () => {
    await open(page, '#/datasets');
    const rows = await page.$$eval('[data-test="dataset-row"]', rs => rs.map(r => [r.dataset.dataset, r.dataset.index]));
    const row = ds.name ? rows.find(r => r[0] === ds.name) : rows[0];
    assert(row, `dataset ${ds.name || '(any)'} not listed`);
    index = row[1];
  });
  await shot(page, 'datasets.png');
  if (index === null) return;
  await check(`dataset ${ds.name || index} shows its class counts`, async () => {
    await open(page, `#/datasets/${index}`);
    const shown = await page.$$eval('[data-test="dataset-class-count"]', cells => cells.map(c =>
      [c.dataset.split, Number(c.dataset.classIndex), c.textContent.trim()]));
    for (const [split, counts] of Object.entries(ds.class_counts || {})) {
      counts.forEach((n, i) => {
        const cell = shown.find(([sp, ci]) => sp === split && ci === i);
        assert(cell, `${split} class ${i} not shown`);
        assertEqual(cell[2], n, `${split} class ${i} count`);
      });
    }
  });
  await check('every class shows an animated preview decoded by reel', async () => {
    // Previews load after the page is ready, each decoded and encoded by the server: wait until
    // every one has loaded or been replaced by its failure note.
    await page.waitForFunction(() => [...document.querySelectorAll('[data-test="preview"]')]
      .every(f => { const img = f.querySelector('img'); return !img || (img.complete && img.naturalWidth > 0); }),
    null, {timeout: 30000}).catch(() => {});
    const sizes = await page.$$eval('[data-test="preview"]',
      figs => figs.map(f => { const img = f.querySelector('img'); return img ? img.naturalWidth : 0; }));
    // Up to three clips per class, as many as the splits hold.
    const counts = Object.values(EXPECT.dataset.class_counts);
    const want = counts[0].reduce((n, _, i) => n + Math.min(3, counts.reduce((m, c) => m + c[i], 0)), 0);
    assertEqual(sizes.length, want, 'previews');
    assert(sizes.every(w => w > 0), `preview widths ${sizes.join(',')}`);
  }, 40000);
  await shot(page, 'dataset.png');
}

async function checkServing(page) {
  await check('serving page shows the model', async () => {
    await open(page, '#/serving');
    if (EXPECT.serving && EXPECT.serving.model) {
      await page.waitForSelector(`[data-test="serving-model"][data-model="${EXPECT.serving.model}"]`);
    }
  });
  await shot(page, 'serving.png');
}

// A run that is still writing: the page follows it without a reload.
async function checkLiveRun(page) {
  await check(`run page follows the live run ${EXPECT.live.run}`, async () => {
    await open(page, `#/runs/${enc(EXPECT.live.run)}`);
    const first = Number(await page.getAttribute('[data-test="run-points"]', 'data-total'));
    await page.waitForFunction(n => Number(document.querySelector('[data-test="run-points"]').dataset.total) > n,
      first, {timeout: 9000});
  });
}

async function checkJobs(page) {
  await check(EXPECT.jobs === false ? 'jobs page says no scheduler is configured' : 'jobs page renders its tables',
    async () => {
      await open(page, '#/jobs');
      if (EXPECT.jobs === false) {
        await page.waitForSelector('[data-test="no-scheduler"]');
        return;
      }
      for (const t of ['jobs-table', 'queues-table', 'nodes-table']) await page.waitForSelector(`[data-test="${t}"]`);
    });
  if (EXPECT.jobs && EXPECT.jobs.states) {
    await check('jobs show their states and the queue its quota use', async () => {
      for (const [id, state] of Object.entries(EXPECT.jobs.states)) {
        const shown = await page.$eval(`[data-test="jobs-row"][data-job="${id}"]`, r => r.children[2].textContent.trim());
        assertEqual(shown, state, `job ${id} state`);
      }
      const use = await page.$eval(`[data-test="queues-row"][data-queue="${EXPECT.jobs.queue}"] [data-resource="cpu"]`,
        el => el.textContent.trim());
      assertEqual(use, EXPECT.jobs.queue_cpu, 'queue cpu use');
    });
  }
  await shot(page, 'jobs.png');
}

async function checkWriter(browser) {
  const page = await newPage(browser, EXPECT.token_writer);
  if (EXPECT.runs && !EXPECT.token_reader) await checkRunsList(page, 'writer');
  if (EXPECT.run) await checkRunPage(page);
  if (EXPECT.live) await checkLiveRun(page);
  const compare = (EXPECT.runs || []).map(r => r.name);
  if (compare.length) await checkCompare(page, compare);
  if (EXPECT.scale) await checkScale(page);
  else await check('runs page renders', () => open(page, '#/runs')).then(() => shot(page, 'runs.png'));
  if (EXPECT.model) await checkModel(page);
  if (EXPECT.diff) await checkDiff(page);
  if (EXPECT.pipeline) await checkPipeline(page);
  await checkDataset(page);
  await checkServing(page);
  await checkJobs(page);
  await page.context().close();
}

/* ------------------------------------------------------------------ main */

async function main() {
  if (SHOTS) fs.mkdirSync(SHOTS, {recursive: true});
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    if (EXPECT.token_writer || EXPECT.token_reader) await checkAuth(browser);
    if (EXPECT.token_reader) await checkReader(browser);
    await checkWriter(browser);
    await check('no script errors on any page', async () => {
      assert(!pageErrors.length, pageErrors.slice(0, 3).join(' | '));
    });
  } finally {
    await browser.close();
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exitCode = failed ? 1 : 0;
}

// A last guard: whatever happens, the test ends.
setTimeout(() => {
  console.log('not ok - the whole test: timed out after 300 s');
  process.exit(1);
}, 300000).unref();

main().catch(e => {
  console.log(`not ok - test harness: ${oneLine(e.stack || e.message || e)}`);
  process.exit(1);
});
