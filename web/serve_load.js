// The "Serving load" panel of the simulation section: `kvlab simulate
// --serve` through /api/simulate's `serve` object, for the model, hardware
// and layout chosen above. Uses app.js's helpers ($, el, fmt, sig, ms,
// table, setStatus, postJSON, lineChart, kvlab), which load first.
'use strict';

const SERVE_COLORS = { running: '#1b6fb5', waiting: '#c2410c' };

function serveChart(canvas) {
  const series = ['running', 'waiting'].map((key) => ({ label: `${key} requests`, color: SERVE_COLORS[key] }));
  const chart = lineChart(canvas, series, 'simulated time (s)', 'requests', { stepped: true });
  if (chart) chart.options.scales.x.ticks.precision = undefined;  // seconds, not positions
  return chart;
}

function serveBody() {
  const body = {
    model: $('sim-model').value || 'llama-3.1-8b', hw: $('sim-hw').value || 'h100',
    tp: Number($('sim-tp').value), pp: Number($('sim-pp').value),
    serve: {
      concurrency: Number($('serve-clients').value), requests: Number($('serve-requests').value),
      prompt_len: $('serve-prompt').value.trim(), output_len: $('serve-output').value.trim(),
      parallel: Number($('serve-parallel').value), prefill_chunk: Number($('serve-chunk').value),
      ctx_size: 0, ramp_s: Number($('serve-ramp').value),
    },
  };
  if ($('sim-link').value) body.link = $('sim-link').value;
  // Room for the longest prompt and answer the lengths can draw.
  const longest = (spec) => Math.max(...spec.split(':').map(Number));
  body.serve.ctx_size = longest(body.serve.prompt_len) + longest(body.serve.output_len) + 1;
  return body;
}

function renderServe(sim) {
  const s = (kvlab.serve = sim.serve);  // the browser tests read the last result here
  const row = (name, p) => [name, ms(p.p50), ms(p.p90), ms(p.p99)];
  const lines = [
    `${fmt(s.throughput_tok_s, 0)} output tok/s and ${sig(s.requests_per_s)} requests/s over ${fmt(s.duration_s, 1)} s: ` +
      `${s.completed} completed, ${s.rejected} rejected, at most ${s.max_waiting} waiting.`,
    `KV cache: at most ${s.max_kv_blocks_used} of ${s.kv_blocks} blocks in use; ${s.passes} passes.`,
  ];
  $('serve-summary').replaceChildren(
    table('Predicted latency percentiles', ['', 'p50', 'p90', 'p99'],
      [row('time to first token', s.ttft_ms), row('inter-token latency', s.itl_ms), row('end to end', s.e2e_ms)]),
    ...lines.map((t) => el('p', { class: 'result' }, t)));
  const chart = kvlab.charts.serve;
  if (!chart) return;
  const [running, waiting] = chart.data.datasets;
  running.data = s.series.map((p) => ({ x: p.t_s, y: p.running }));
  waiting.data = s.series.map((p) => ({ x: p.t_s, y: p.waiting }));
  chart.update('none');
}

async function runServeLoad(ev) {
  ev.preventDefault();
  const body = serveBody();
  $('serve-run').disabled = true;
  setStatus('serve-status', 'Simulating the load…');
  try {
    const sim = await postJSON('/api/simulate', body);
    const clients = `${body.serve.concurrency} clients` + (body.serve.ramp_s > 0 ? ` started over ${body.serve.ramp_s} s` : ' started together');
    setStatus('serve-status', `${body.model} on ${body.hw}: ${body.serve.requests} requests from ${clients}, ` +
      `${body.serve.parallel} slots.`);
    renderServe(sim);
  } catch (e) {
    setStatus('serve-status', 'Simulation failed: ' + e.message, true);
  } finally {
    $('serve-run').disabled = false;
  }
}

kvlab.charts.serve = serveChart($('serve-chart'));
$('serve-form').addEventListener('submit', runServeLoad);
