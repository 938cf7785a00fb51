// The page of `kvlab serve`: five sections over the server's JSON and SSE
// endpoints, plain DOM and fetch, with Chart.js when the server has it.
'use strict';

const $ = (id) => document.getElementById(id);
const COLORS = { cached: '#1b6fb5', no_cache: '#c2410c' };
const LABELS = { cached: 'KV cache', no_cache: 'no KV cache' };
const reducedMotion = window.matchMedia('(prefers-reduced-motion: reduce)').matches;

// The browser tests read the charts' data through this.
const kvlab = (window.kvlab = { charts: {} });

// ---- formatting ---------------------------------------------------------------

function fmt(x, digits = 1) {
  if (x === null || x === undefined || !Number.isFinite(Number(x))) return '–';
  return Number(x).toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: 0 });
}
// Three significant digits, for rates spanning orders of magnitude.
function sig(x) {
  if (x === null || x === undefined || !Number.isFinite(Number(x))) return '–';
  return Number(Number(x).toPrecision(3)).toLocaleString('en-US');
}
function pct(x) { return fmt(100 * x, x < 0.1 ? 1 : 0) + '%'; }
function si(x, unit) {
  const steps = [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
  for (const [f, p] of steps) if (Math.abs(x) >= f) return sig(x / f) + ' ' + p + unit;
  return sig(x) + ' ' + unit;
}
function ms(x) { return x >= 1000 ? fmt(x / 1000, 2) + ' s' : fmt(x, x < 10 ? 2 : 1) + ' ms'; }

// Builds an element: el('td', {class: 'x'}, 'text', child, ...). Text is always
// set as text, never parsed as HTML.
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'style') Object.assign(e.style, v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

function table(caption, head, rows, cls = 'numbers') {
  return el('table', { class: cls },
    el('caption', {}, caption),
    el('thead', {}, el('tr', {}, ...head.map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, ...rows.map((r) => el('tr', {}, el('th', { scope: 'row' }, r[0]), ...r.slice(1).map((c) => el('td', {}, c))))));
}

function setStatus(id, text, isError = false) {
  const p = $(id);
  p.textContent = text;
  p.classList.toggle('error', isError);
}

// ---- HTTP -------------------------------------------------------------------

function headers(extra = {}) {
  const h = { ...extra };
  const key = $('api-key').value.trim();
  if (key) h.Authorization = 'Bearer ' + key;
  return h;
}

// The server's OpenAI-style {"error": {"message": ...}} as an Error.
async function responseError(res) {
  let message = `HTTP ${res.status}`;
  try {
    const body = await res.json();
    if (body.error && body.error.message) message = body.error.message;
  } catch (_) { /* not JSON: keep the status */ }
  const e = new Error(message);
  e.status = res.status;
  return e;
}

async function getJSON(path) {
  const res = await fetch(path, { headers: headers() });
  if (!res.ok) throw await responseError(res);
  return res.json();
}

async function postJSON(path, body) {
  const res = await fetch(path, {
    method: 'POST', headers: headers({ 'Content-Type': 'application/json' }), body: JSON.stringify(body),
  });
  if (!res.ok) throw await responseError(res);
  return res.json();
}

// The payloads of a server-sent event stream ("data: ..." lines), as they come.
// fetch rather than EventSource, because EventSource cannot send the API key
// and cannot POST.
async function* sseData(res) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split('\n')) if (line.startsWith('data: ')) yield line.slice(6);
    }
  }
}

// ---- charts -------------------------------------------------------------------

const hasChart = () => typeof window.Chart === 'function';

// An x/y line chart of `series` ([{label, color}] in order), hidden and
// null without Chart.js; the options: round points, steps, a tooltip label.
function lineChart(canvas, series, xTitle, yTitle, { points = false, stepped = false, tooltip } = {}) {
  if (!hasChart()) {
    canvas.parentElement.hidden = true;
    return null;
  }
  return new Chart(canvas, {
    type: 'line',
    data: {
      datasets: series.map(({ label, color }) => ({
        label, data: [], borderColor: color, backgroundColor: color,
        borderWidth: 2, pointRadius: points ? 3 : 0, tension: 0, stepped,
      })),
    },
    options: {
      animation: false, // the sections animate by adding data
      maintainAspectRatio: false,
      parsing: false,
      interaction: { mode: 'nearest', axis: 'x', intersect: false },
      scales: {
        x: { type: 'linear', ticks: { precision: 0 }, title: { display: true, text: xTitle } },
        y: { beginAtZero: true, title: { display: true, text: yTitle } },
      },
      plugins: { legend: { position: 'bottom' }, tooltip: tooltip ? { callbacks: { label: tooltip } } : {} },
    },
  });
}

// One dataset per mode (KV cache, no KV cache).
function modeChart(canvas, xTitle, yTitle, unit, points) {
  const modes = ['cached', 'no_cache'].map((mode) => ({ label: LABELS[mode], color: COLORS[mode] }));
  return lineChart(canvas, modes, xTitle, yTitle, {
    points, tooltip: (c) => `${c.dataset.label}: ${sig(c.parsed.y)} ${unit} at position ${c.parsed.x}`,
  });
}

function clearChart(chart) {
  if (!chart) return;
  for (const d of chart.data.datasets) d.data = [];
  chart.update('none');
}

// ---- server info and catalogs ---------------------------------------------------

async function loadServer() {
  try {
    const models = await getJSON('/v1/models');
    const m = models.data[0];
    const meta = m.meta ? ` · context ${m.meta.n_ctx} tokens · ${m.meta.slots} slots · ${fmt(m.meta.n_params / 1e6, 0)} M parameters` : ' (loading)';
    $('server-info').textContent = `Serving ${m.id}${meta}`;
    $('server-info').classList.remove('error');
  } catch (e) {
    $('server-info').textContent = e.status === 401 ? 'This server needs its API key: enter it on the right.' : 'Server: ' + e.message;
    $('server-info').classList.add('error');
    return;
  }
  try {
    const cat = await getJSON('/api/catalog');
    fillSelect($('sim-model'), cat.models.map((m) => [m.id, `${m.id} (${m.layers} layers)`]), cat.defaults.model);
    fillSelect($('diag-model'), cat.models.map((m) => [m.id, m.id]), cat.defaults.model);
    fillSelect($('sim-hw'), cat.hardware.map((h) => [h.id, h.name]), cat.defaults.hw);
    fillSelect($('sim-link'), [['', 'the device\'s own']].concat(cat.links.map((l) => [l.id, l.name])), '');
    fillSelect($('diag-hw'), [['', 'unknown']].concat(cat.hardware.map((h) => [h.id, h.name])), '');
  } catch (e) {
    setStatus('sim-status', 'Could not load the catalogs: ' + e.message, true);
  }
}

function fillSelect(select, options, selected) {
  select.replaceChildren(...options.map(([value, label]) => el('option', { value, selected: value === selected }, label)));
}

// ---- Run simulation --------------------------------------------------------------

// Enough points for a smooth curve; a 65536-step run has far more than a chart can show.
function downsample(steps, max = 600) {
  if (steps.length <= max) return steps;
  const out = [];
  for (let i = 0; i < max; i++) out.push(steps[Math.round((i * (steps.length - 1)) / (max - 1))]);
  return out;
}

async function runSimulation(ev) {
  ev.preventDefault();
  const body = {
    model: $('sim-model').value || 'llama-3.1-8b', hw: $('sim-hw').value || 'h100',
    prompt: Number($('sim-prompt').value), gen: Number($('sim-gen').value),
    tp: Number($('sim-tp').value), pp: Number($('sim-pp').value),
  };
  if ($('sim-link').value) body.link = $('sim-link').value;
  $('sim-run').disabled = true;
  setStatus('sim-status', 'Simulating…');
  try {
    const sim = await postJSON('/api/simulate', body);
    setStatus('sim-status', `${sim.model.id} on ${sim.hardware.name}, ${body.prompt}-token prompt, ${body.gen} generated tokens (${sim.options.weights} weights).`);
    renderSimSummary(sim);
    renderSimFit(sim);
    await animateSimulation(downsample(sim.steps));
  } catch (e) {
    setStatus('sim-status', 'Simulation failed: ' + e.message, true);
  } finally {
    $('sim-run').disabled = false;
  }
}

// Draws the curves left to right over about a second, so the eye follows the
// no-cache line falling away from the flat cached one as the sequence grows.
function animateSimulation(steps) {
  const chart = kvlab.charts.sim;
  if (!chart) return Promise.resolve();
  clearChart(chart);
  const [cached, naive] = chart.data.datasets;
  const point = (s, mode) => ({ x: s.position, y: s[mode].tok_s });
  // The final x range from the start, so the axis does not rescale as the lines grow.
  chart.options.scales.x.min = steps[0].position;
  chart.options.scales.x.max = steps[steps.length - 1].position;
  if (reducedMotion) {
    cached.data = steps.map((s) => point(s, 'cached'));
    naive.data = steps.map((s) => point(s, 'no_cache'));
    chart.update('none');
    return Promise.resolve();
  }
  const duration = 1200;
  return new Promise((resolve) => {
    const t0 = performance.now();
    const frame = (now) => {
      const upto = Math.min(steps.length, Math.ceil((steps.length * (now - t0)) / duration));
      for (let i = cached.data.length; i < upto; i++) {
        cached.data.push(point(steps[i], 'cached'));
        naive.data.push(point(steps[i], 'no_cache'));
      }
      chart.update('none');
      if (upto < steps.length) requestAnimationFrame(frame);
      else resolve();
    };
    requestAnimationFrame(frame);
  });
}

function renderSimSummary(sim) {
  const last = sim.steps[sim.steps.length - 1];
  const first = sim.steps[0];
  const rows = [
    ['TTFT (prefill)', ms(sim.prefill.ms), ms(sim.prefill.ms)],
    [`tok/s at position ${first.position}`, sig(first.cached.tok_s), sig(first.no_cache.tok_s)],
    [`tok/s at position ${last.position}`, sig(last.cached.tok_s), sig(last.no_cache.tok_s)],
    ['average tok/s', sig(sim.cached.mean_tok_s), sig(sim.no_cache.mean_tok_s)],
    ['total time', ms(1000 * sim.cached.total_s), ms(1000 * sim.no_cache.total_s)],
    ['the last step is', last.cached.bound, last.no_cache.bound],
  ];
  const notes = [];
  if (sim.crossover_position !== null && sim.crossover_position !== undefined)
    notes.push(`Without the cache, decode turns compute-bound at position ${sim.crossover_position}, where recomputing the sequence reaches the ridge of ${fmt(sim.machine.ridge_flop_per_byte, 0)} FLOP/byte.`);
  $('sim-summary').replaceChildren(
    table('Predicted, with and without the KV cache', ['', 'KV cache', 'no KV cache'], rows),
    ...notes.map((n) => el('p', { class: 'result' }, n)));
}

// What each device must hold (weights, the KV cache at the last position,
// activations) against its usable memory, and what the links cost a step.
function renderSimFit(sim) {
  const m = sim.memory.per_device, lay = sim.layout;
  const scale = Math.max(m.total_bytes, m.usable_bytes);
  const part = (cls, bytes) => el('div', { class: `part ${cls}`, style: { width: `${(100 * bytes) / scale}%` } });
  const where = lay.devices > 1
    ? `Each of ${lay.devices} devices (tensor parallel ${lay.tp} × pipeline ${lay.pp}, over ${lay.link.name})`
    : 'One device';
  const verdict = `${where} holds weights ${si(m.weight_bytes, 'B')} + KV cache ${si(m.kv_bytes, 'B')} + ` +
    `activations ${si(m.activation_bytes, 'B')} = ${si(m.total_bytes, 'B')} of ${si(m.usable_bytes, 'B')} usable: `;
  const parts = [
    el('h3', {}, lay.devices > 1 ? 'Memory per device' : 'Memory'),
    el('div', { class: `fit-bar${sim.memory.fits ? '' : ' over'}`, id: 'sim-fit-bar', role: 'img',
      'aria-label': verdict + (sim.memory.fits ? 'fits' : 'does not fit') },
    part('weights', m.weight_bytes), part('kv', m.kv_bytes), part('activations', m.activation_bytes),
    el('div', { class: 'usable', style: { left: `${(100 * m.usable_bytes) / scale}%` } })),
    el('p', { class: 'legend' }, el('span', { class: 'swatch weights' }), 'weights', el('span', { class: 'swatch kv' }),
      'KV cache', el('span', { class: 'swatch activations' }), 'activations', el('span', { class: 'swatch usable' }),
      'usable memory'),
    el('p', { id: 'sim-fit-verdict' }, verdict,
      el('span', { class: `fits${sim.memory.fits ? '' : ' over'}` }, sim.memory.fits ? 'fits.' : 'does not fit.')),
  ];
  const s = sim.memory.suggestion;
  if (!sim.memory.fits && s) parts.push(el('p', {}, `The smallest layout that fits: tensor parallel ${s.tp} × pipeline ${s.pp}.`));
  const last = sim.steps[sim.steps.length - 1].cached;
  if (lay.devices > 1)
    parts.push(el('p', { id: 'sim-link-time' }, `On the links: ${ms(last.comm_ms)} of the last cached step's ${ms(last.ms)} ` +
      `(${pct(last.comm_ms / last.ms)}), and ${ms(sim.prefill.comm_ms)} of the prefill's ${ms(sim.prefill.ms)}.`));
  $('sim-fit').replaceChildren(...parts);
}

// ---- Live race ------------------------------------------------------------------

let raceAbort = null;

function raceRow(mode) { return $('race-table').querySelector(`tr[data-mode="${mode}"]`).cells; }

function resetRace() {
  clearChart(kvlab.charts.race);
  for (const mode of ['cached', 'no_cache']) {
    const cells = raceRow(mode);
    cells[1].textContent = '0';
    for (let i = 2; i < cells.length; i++) cells[i].textContent = '–';
  }
  $('race-summary').textContent = '';
  $('race-text').textContent = '';
}

async function runRace(ev) {
  ev.preventDefault();
  if (raceAbort) return;
  resetRace();
  const n = Number($('race-n').value);
  const query = new URLSearchParams({ prompt: $('race-prompt').value, n: String(n) });
  const ctrl = new AbortController();
  raceAbort = ctrl;
  $('race-run').disabled = true;
  $('race-stop').disabled = false;
  setStatus('race-status', 'Racing…');
  const decodeMs = { cached: 0, no_cache: 0 };
  try {
    const res = await fetch('/api/race?' + query, { headers: headers(), signal: ctrl.signal });
    if (!res.ok) throw await responseError(res);
    for await (const data of sseData(res)) {
      if (data === '[DONE]') break;
      const e = JSON.parse(data);
      if (e.error) throw new Error(e.error.message);
      if (e.type === 'token') onRaceToken(e, decodeMs);
      else if (e.type === 'summary') onRaceSummary(e);
    }
    setStatus('race-status', 'Done.');
  } catch (e) {
    if (e.name === 'AbortError') setStatus('race-status', 'Stopped (the server stops generating too).');
    else setStatus('race-status', 'Race failed: ' + e.message, true);
  } finally {
    raceAbort = null;
    $('race-run').disabled = false;
    $('race-stop').disabled = true;
  }
}

function onRaceToken(e, decodeMs) {
  const cells = raceRow(e.mode);
  cells[1].textContent = String(e.index + 1);
  cells[3].textContent = ms(e.latency_ms);
  if (e.index === 0) {
    cells[2].textContent = ms(e.latency_ms);
  } else {
    decodeMs[e.mode] += e.latency_ms;
    cells[4].textContent = sig((1000 * e.index) / decodeMs[e.mode]);
    const chart = kvlab.charts.race;
    if (chart) {
      chart.data.datasets[e.mode === 'cached' ? 0 : 1].data.push({ x: e.position, y: e.latency_ms });
      chart.update('none');
    }
  }
  if (e.mode === 'cached') $('race-text').textContent += e.token_text;
}

function onRaceSummary(s) {
  const parts = [
    `${s.n} tokens per mode after a ${s.prompt_tokens}-token prompt.`,
    `Decode: ${sig(s.cached.decode_tok_s)} tok/s with the KV cache, ${sig(s.no_cache.decode_tok_s)} tok/s without`,
  ];
  if (s.decode_speedup) parts[1] += ` (${fmt(s.decode_speedup, 1)}x).`;
  else parts[1] += '.';
  parts.push(s.identical ? 'Both modes produced identical tokens.' : 'The two modes produced DIFFERENT tokens.');
  $('race-summary').textContent = parts.join(' ');
}

// ---- Phases ---------------------------------------------------------------------

async function runPhases(ev) {
  ev.preventDefault();
  $('phases-run').disabled = true;
  setStatus('phases-status', 'Running one request…');
  try {
    const r = await postJSON('/api/phases', {
      prompt: $('phases-prompt').value, n: Number($('phases-n').value), no_kv_cache: $('phases-nocache').checked,
    });
    setStatus('phases-status',
      `${r.prompt_tokens}-token prompt, ${r.tokens.length} tokens (stopped: ${r.stop}), ${r.kv_cache ? 'with' : 'without'} the KV cache, ${r.threads} threads: ` +
      `TTFT ${ms(r.ttft_ms)}, prefill ${sig(r.prefill_tok_s)} tok/s, decode ${sig(r.decode_tok_s)} tok/s.`);
    renderTimeline(r);
    renderVerdicts(r);
  } catch (e) {
    setStatus('phases-status', 'Request failed: ' + e.message, true);
  } finally {
    $('phases-run').disabled = false;
  }
}

// A strip of the request's wall time: the prefill, then one segment per
// decoded token (alternate shades so single tokens stay visible).
function renderTimeline(r) {
  const total = Math.max(r.total_ms, 1e-9);
  const segs = r.tokens.map((t, i) => el('div', {
    class: `seg ${t.phase}${t.phase === 'decode' && i % 2 ? ' alt' : ''}`,
    style: { left: `${(100 * t.start_ms) / total}%`, width: `${(100 * (t.end_ms - t.start_ms)) / total}%` },
    title: `${t.phase === 'prefill' ? `prefill of ${r.prompt_tokens} prompt tokens, then token 1` : `token ${t.index + 1}`}` +
      ` (position ${t.position}, ${JSON.stringify(t.text)}): ${ms(t.end_ms - t.start_ms)}`,
  }));
  const prefill = r.tokens.length ? r.tokens[0].end_ms : 0;
  const label = `Timeline of ${ms(total)}: prefill ${ms(prefill)}, then ${r.tokens.length - 1} decode steps ` +
    `(${r.kv_cache ? 'one token each' : 'each recomputing the whole sequence'}).`;
  $('phases-timeline').replaceChildren(
    el('p', { class: 'legend' }, el('span', { class: 'swatch prefill' }), 'prefill ', el('span', { class: 'swatch decode' }),
      r.kv_cache ? 'decode' : 'decode (recompute)'),
    el('div', { class: 'timeline', role: 'img', 'aria-label': label }, ...segs),
    el('div', { class: 'axis' }, el('span', {}, '0'), el('span', {}, ms(total))),
    el('p', { class: 'generated' }, 'Output: ', el('output', {}, r.text)));
}

function renderVerdicts(r) {
  const parts = [];
  if (r.peaks) {
    parts.push(el('p', {}, `Peaks (${r.peaks.source}, at ${r.threads} threads): ${si(r.peaks.flops, 'op/s')} ${r.peaks.flops_kind}, ` +
      `${si(r.peaks.bytes_per_s, 'B/s')} read bandwidth; ridge ${fmt(r.peaks.ridge, 1)} FLOP/byte.`));
  } else {
    parts.push(el('p', { class: 'notice', id: 'phases-noprofile' }, r.profile_message || 'No hardware profile.'));
  }
  const rows = r.phases.map((p) => {
    const v = p.verdict;
    const name = p.phase === 'decode' && !r.kv_cache ? 'decode (recompute)' : p.phase;
    // Recompute passes grow by one token each: their size is an average.
    const per = p.tokens / p.passes;
    const size = `${p.passes} × ${fmt(per, 1)} token${per === 1 ? '' : 's'}${Number.isInteger(per) ? '' : ' on average'}`;
    return [name, size, ms(p.ms),
      `${si(p.achieved_flops, 'FLOP/s')}, ${si(p.achieved_bytes_per_s, 'B/s')}`,
      v ? `${pct(v.flops_utilization)} compute, ${pct(v.bw_utilization)} bandwidth` : '–',
      `${fmt(p.intensity, 1)} FLOP/byte`,
      v ? `${v.bound}, ${pct(v.roof_fraction)} of its roof` : 'needs kvlab probe'];
  });
  parts.push(table('Each phase on the roofline: achieved against the probed peaks',
    ['phase', 'passes', 'time', 'achieved', 'of peak', 'intensity', 'verdict'], rows));
  $('phases-verdicts').replaceChildren(...parts);
}

// ---- Diagnose ---------------------------------------------------------------------

async function runDiagnose(ev) {
  ev.preventDefault();
  const body = {
    ttft_ms: Number($('diag-ttft').value), decode_tok_s: Number($('diag-tps').value),
    model: $('diag-model').value || 'llama-3.1-8b',
  };
  if ($('diag-hw').value) body.hw = $('diag-hw').value;
  const answer = $('diag-answer').value.trim();
  $('diag-run').disabled = true;
  setStatus('diag-status', 'Diagnosing…');
  try {
    // The endpoint grades when given an answer and diagnoses otherwise: ask both.
    const [diagnosis, grade] = await Promise.all([
      postJSON('/api/diagnose', body),
      answer ? postJSON('/api/diagnose', { ...body, answer }) : Promise.resolve(null),
    ]);
    setStatus('diag-status', answer ? '' : 'No diagnosis of yours to grade: here is the computed one.');
    renderGrade(grade);
    renderDiagnosis(diagnosis);
  } catch (e) {
    setStatus('diag-status', 'Diagnosis failed: ' + e.message, true);
  } finally {
    $('diag-run').disabled = false;
  }
}

function renderGrade(g) {
  if (!g) {
    $('diag-grade').replaceChildren();
    return;
  }
  const points = [['phase', 'Phase'], ['resource', 'Limiting resource'], ['upgrade', 'Upgrade']];
  $('diag-grade').replaceChildren(
    el('h3', {}, `Your diagnosis: ${fmt(g.score, 1)} / ${g.out_of}`),
    el('ul', { class: 'grade', id: 'diag-feedback' }, ...points.map(([k, label]) =>
      el('li', { class: `mark-${g[k].mark}` }, el('strong', {}, `${label}: ${g[k].mark}. `), g[k].feedback))));
}

function renderDiagnosis(d) {
  const items = [
    el('p', {}, el('strong', {}, 'Struggling phase: '), d.struggling_phase, '. ', el('strong', {}, 'Limit: '), d.limiting_resource, '.'),
    el('p', {}, d.cause),
    el('p', {}, el('strong', {}, 'Upgrade: '), d.upgrade),
  ];
  if (d.remedies && d.remedies.length)
    items.push(el('h4', {}, 'Remedies, by predicted gain'),
      el('ul', {}, ...d.remedies.map((r) => el('li', {}, el('strong', {}, `${r.name} (${fmt(r.gain, 1)}x): `), r.detail))));
  for (const c of d.contradictions || [])
    items.push(el('h4', {}, 'Something does not add up'), el('p', {}, c.finding),
      el('ul', {}, ...c.explanations.map((x) => el('li', {}, x))));
  $('diag-result').replaceChildren(el('h3', {}, 'Computed diagnosis'), ...items);
}

// ---- Chat ------------------------------------------------------------------------

const chat = { history: [], abort: null };

function addMessage(role, text) {
  const body = el('div', { class: 'text' }, text);
  const meta = el('div', { class: 'meta' });
  const msg = el('div', { class: `msg ${role}` }, el('div', { class: 'role' }, role === 'user' ? 'You' : 'Model'), body, meta);
  $('chat-log').append(msg);
  msg.scrollIntoView({ block: 'nearest' });
  return { msg, body, meta };
}

async function sendChat(ev) {
  ev.preventDefault();
  const text = $('chat-input').value.trim();
  if (!text || chat.abort) return;
  $('chat-input').value = '';
  chat.history.push({ role: 'user', content: text });
  addMessage('user', text);
  const reply = addMessage('assistant', '');
  reply.msg.classList.add('streaming');
  chat.abort = new AbortController();
  $('chat-send').disabled = true;
  setStatus('chat-status', '');
  const t0 = performance.now();
  let firstMs = null;
  let content = '';
  let usage = null;
  try {
    const res = await fetch('/v1/chat/completions', {
      method: 'POST', headers: headers({ 'Content-Type': 'application/json' }), signal: chat.abort.signal,
      body: JSON.stringify({
        messages: chat.history, stream: true, stream_options: { include_usage: true },
        max_tokens: Number($('chat-max').value), temperature: Number($('chat-temp').value),
      }),
    });
    if (!res.ok) throw await responseError(res);
    for await (const data of sseData(res)) {
      if (data === '[DONE]') break;
      const c = JSON.parse(data);
      if (c.error) throw new Error(c.error.message);
      const delta = c.choices && c.choices[0] && c.choices[0].delta && c.choices[0].delta.content;
      if (delta) {
        if (firstMs === null) firstMs = performance.now() - t0;
        content += delta;
        reply.body.textContent = content;
      }
      if (c.usage) usage = c;
    }
    chat.history.push({ role: 'assistant', content });
    reply.meta.textContent = usage ? timingLine(usage, firstMs) : '';
  } catch (e) {
    chat.history.pop(); // the user message had no answer: leave it out of the context
    reply.msg.classList.add('failed');
    reply.meta.textContent = 'Failed: ' + e.message;
  } finally {
    reply.msg.classList.remove('streaming');
    chat.abort = null;
    $('chat-send').disabled = false;
  }
}

function timingLine(u, firstMs) {
  const t = u.timings || {};
  const parts = [`TTFT ${ms(t.ttft_ms)}` + (firstMs !== null ? ` (${ms(firstMs)} seen here)` : '')];
  if (t.predicted_n > 0) parts.push(`decode ${sig(t.predicted_per_second)} tok/s`);
  parts.push(`${u.usage.completion_tokens} tokens`);
  parts.push(`prompt ${u.usage.prompt_tokens} tokens at ${sig(t.prompt_per_second)} tok/s`);
  return parts.join(' · ');
}

function clearChat() {
  if (chat.abort) chat.abort.abort();
  chat.history = [];
  $('chat-log').replaceChildren();
  setStatus('chat-status', 'Conversation cleared.');
}

// ---- start --------------------------------------------------------------------------

function start() {
  if (!hasChart()) $('chart-missing').hidden = false;
  kvlab.charts.sim = modeChart($('sim-chart'), 'sequence position (tokens)', 'decode speed (tok/s)', 'tok/s', false);
  kvlab.charts.race = modeChart($('race-chart'), 'position (tokens)', 'latency of one token (ms)', 'ms', true);

  const key = $('api-key');
  key.value = sessionStorage.getItem('kvlab-api-key') || '';
  key.addEventListener('change', () => {
    sessionStorage.setItem('kvlab-api-key', key.value.trim());
    loadServer();
  });

  $('sim-form').addEventListener('submit', runSimulation);
  $('race-form').addEventListener('submit', runRace);
  $('race-stop').addEventListener('click', () => raceAbort && raceAbort.abort());
  $('phases-form').addEventListener('submit', runPhases);
  $('diag-form').addEventListener('submit', runDiagnose);
  $('chat-form').addEventListener('submit', sendChat);
  $('chat-clear').addEventListener('click', clearChat);
  $('chat-input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) {
      e.preventDefault();
      $('chat-form').requestSubmit();
    }
  });
  loadServer();
}

start();
