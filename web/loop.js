// The page's "The loop" section: the autoregressive loop and the quadratic
// trap, both drawn from one /api/race stream as the server generates. Uses
// app.js's helpers ($, el, fmt, si, ms, headers, responseError, sseData,
// setStatus, kvlab), which load first.
'use strict';

const MODES = ['cached', 'no_cache'];
const TRAP_PX = 360;  // the larger side a triangle panel may take
const TRAP_COLORS = { cached: '#1b6fb5', no_cache: '#c2410c', reused: '#b9d3ea', empty: '#eef1f5' };

// Everything the browser tests read: the events as they came and the scale.
const loop = (kvlab.loop = { events: [], prompt: [], n: 0, cell: 0, abort: null });

// A token as a chip: its whitespace made visible, so a newline or a leading
// space still shows as a token.
function chip(piece, cls) {
  const shown = piece.replace(/\n/g, '↵').replace(/^ /, '·') || '∅';
  return el('span', { class: `tok ${cls}`, role: 'listitem', title: JSON.stringify(piece) }, shown);
}

function resetLoop(promptPieces, n) {
  loop.events = [];
  loop.prompt = promptPieces;
  loop.n = n;
  loop.totals = Object.fromEntries(MODES.map((m) => [m, { rows: 0, attended: 0, flops: 0, kv: 0, weights: 0 }]));
  // Integer cells, so each drawn position covers the same whole pixels in both panels.
  const L = promptPieces.length + n;
  loop.cell = Math.max(1, Math.floor(TRAP_PX / L));
  for (const mode of MODES) {
    const canvas = $(`trap-${mode}`);
    canvas.width = canvas.height = loop.cell * L;
    drawRows(canvas, 0, 0, mode);
    $(`trap-${mode}-caption`).textContent = '–';
  }
  $('loop-input').replaceChildren(...promptPieces.map((p) => chip(p, 'prompt')));
  $('loop-step').textContent = `Step 0 of ${n}: the prompt, ${promptPieces.length} tokens.`;
  $('trap-summary').textContent = '';
  renderTotals();
}

// The triangle of one mode's step: rows before `first` were computed by
// earlier steps and reused from the cache (pale), rows first .. end-1 were
// computed by this one. Row r attends to positions 0 .. r (causal), so it is
// r + 1 cells long; the grey triangle is the whole run's final size.
function drawRows(canvas, first, end, mode) {
  const g = canvas.getContext('2d');
  const c = loop.cell, L = canvas.width / c;
  g.clearRect(0, 0, canvas.width, canvas.height);
  const row = (r, color) => {
    g.fillStyle = color;
    g.fillRect(0, r * c, (r + 1) * c, c);
  };
  for (let r = end; r < L; r++) row(r, TRAP_COLORS.empty);
  for (let r = 0; r < first; r++) row(r, TRAP_COLORS.reused);
  for (let r = first; r < end; r++) row(r, TRAP_COLORS[mode]);
}

function onLoopToken(e) {
  loop.events.push(e);
  const w = e.work;
  const t = loop.totals[e.mode];
  t.rows += w.rows;
  t.attended += w.attended;
  t.flops += w.attention_flops;
  t.kv += w.kv_bytes;
  t.weights += w.weight_bytes;
  drawRows($(`trap-${e.mode}`), w.first_row, w.first_row + w.rows, e.mode);
  $(`trap-${e.mode}-caption`).textContent =
    `step ${e.index + 1} computed ${fmt(w.rows, 0)} row${w.rows === 1 ? '' : 's'}, ${fmt(w.attended, 0)} positions ` +
    `(${si(w.attention_flops, 'FLOP')}, ${si(w.kv_bytes + w.weight_bytes, 'B')} read) in ${ms(e.latency_ms)}`;
  renderTotals();
  if (e.mode === 'cached') growInput(e);
  else $('loop-step').textContent += ` Without the cache the same step took ${ms(e.latency_ms)}.`;
}

// The newest token leaves the output and joins the input: the previous
// newest becomes an ordinary generated token.
function growInput(e) {
  const input = $('loop-input');
  for (const old of input.querySelectorAll('.newest')) old.classList.remove('newest');
  input.append(chip(e.token_text, 'generated newest'));
  const what = e.index === 0 ? `the prefill of the ${loop.prompt.length}-token prompt made` : 'the model made';
  $('loop-step').textContent = `Step ${e.index + 1} of ${loop.n}: ${what} ${JSON.stringify(e.token_text)}, ` +
    `fed back as input position ${e.position}, in ${ms(e.latency_ms)} with the KV cache.`;
}

function renderTotals() {
  for (const mode of MODES) {
    const t = loop.totals[mode];
    const cells = $('trap-table').querySelector(`tr[data-mode="${mode}"]`).cells;
    const values = [fmt(t.rows, 0), fmt(t.attended, 0), si(t.flops, 'FLOP'), si(t.kv, 'B'), si(t.weights, 'B')];
    values.forEach((v, i) => { cells[i + 1].textContent = t.rows ? v : i < 2 ? '0' : '–'; });
  }
}

function onLoopSummary(s) {
  const c = loop.totals.cached, u = loop.totals.no_cache;
  $('trap-summary').textContent =
    `To make the same ${s.n} tokens, the run without the cache pushed ${fmt(u.rows / c.rows, 1)}x the rows through ` +
    `the layers, attended ${fmt(u.attended / c.attended, 1)}x the positions and read ` +
    `${fmt((u.kv + u.weights) / (c.kv + c.weights), 1)}x the bytes. ` +
    (s.identical ? 'Both produced identical tokens.' : 'The two produced DIFFERENT tokens.');
}

async function runLoop(ev) {
  ev.preventDefault();
  if (loop.abort) return;
  const n = Number($('loop-n').value);
  const query = new URLSearchParams({ prompt: $('loop-prompt').value, n: String(n) });
  loop.abort = new AbortController();
  $('loop-run').disabled = true;
  $('loop-stop').disabled = false;
  setStatus('loop-status', 'Generating…');
  try {
    const res = await fetch('/api/race?' + query, { headers: headers(), signal: loop.abort.signal });
    if (!res.ok) throw await responseError(res);
    for await (const data of sseData(res)) {
      if (data === '[DONE]') break;
      const e = JSON.parse(data);
      if (e.error) throw new Error(e.error.message);
      if (e.type === 'prompt') resetLoop(e.tokens, e.n);
      else if (e.type === 'token') onLoopToken(e);
      else if (e.type === 'summary') onLoopSummary(e);
    }
    setStatus('loop-status', 'Done.');
  } catch (e) {
    if (e.name === 'AbortError') setStatus('loop-status', 'Stopped (the server stops generating too).');
    else setStatus('loop-status', 'The loop failed: ' + e.message, true);
  } finally {
    loop.abort = null;
    $('loop-run').disabled = false;
    $('loop-stop').disabled = true;
  }
}

$('loop-form').addEventListener('submit', runLoop);
$('loop-stop').addEventListener('click', () => loop.abort && loop.abort.abort());
