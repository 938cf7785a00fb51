// The "Serving load" panel of the simulation section: `kvlab simulate
// --serve` through /api/simulate's `serve` object, for the model, hardware
// and layout chosen above. The chosen load is swept from one client up, so
// the chart shows where the latency percentiles turn upward; the table and
// the time series are the chosen load's. Uses app.js's helpers ($, el, fmt,
// sig, ms, table, setStatus, postJSON, lineChart, kvlab), which load first.
'use strict';

const PERCENTILE_SERIES = [
  { key: ['ttft_ms', 'p50'], label: 'TTFT p50', color: '#1b6fb5' },
  { key: ['ttft_ms', 'p99'], label: 'TTFT p99', color: '#8cb7de' },
  { key: ['itl_ms', 'p50'], label: 'inter-token p50', color: '#c2410c' },
  { key: ['itl_ms', 'p99'], label: 'inter-token p99', color: '#f0a27a' },
];
const QUEUE_SERIES = [{ label: 'running requests', color: '#1b6fb5' }, { label: 'waiting requests', color: '#c2410c' }];

function percentileChart(canvas) {
  const chart = lineChart(canvas, PERCENTILE_SERIES, 'clients', 'latency (ms)', {
    points: true, tooltip: (c) => `${c.dataset.label}: ${ms(c.parsed.y)} at ${c.parsed.x} clients`,
  });
  if (chart) chart.options.scales.x.type = 'logarithmic';  // 1, 2, 4, ... clients evenly spaced
  return chart;
}

function queueChart(canvas) {
  const chart = lineChart(canvas, QUEUE_SERIES, 'simulated time (s)', 'requests', { stepped: true });
  if (chart) chart.options.scales.x.ticks.precision = undefined;  // seconds, not positions
  return chart;
}

function serveBody(clients) {
  const body = {
    model: $('sim-model').value || 'llama-3.1-8b', hw: $('sim-hw').value || 'h100',
    tp: Number($('sim-tp').value), pp: Number($('sim-pp').value),
    serve: {
      concurrency: clients, requests: Number($('serve-requests').value),
      prompt_len: $('serve-prompt').value.trim(), output_len: $('serve-output').value.trim(),
      parallel: Number($('serve-parallel').value), prefill_chunk: Number($('serve-chunk').value),
      ctx_size: 0, ramp_s: Number($('serve-ramp').value), series_points: 200,
      pass_target_ms: $('serve-target').value.trim() === 'auto' ? 'auto' : Number($('serve-target').value),
    },
  };
  if ($('sim-link').value) body.link = $('sim-link').value;
  // Room for the longest prompt and answer the lengths can draw.
  const longest = (spec) => Math.max(...spec.split(':').map(Number));
  body.serve.ctx_size = longest(body.serve.prompt_len) + longest(body.serve.output_len) + 1;
  return body;
}

// 1, 2, 4, ... below `clients`, then `clients`.
function sweepLevels(clients) {
  const levels = [];
  for (let c = 1; c < clients; c *= 2) levels.push(c);
  return levels.concat([clients]);
}

function renderServeTable(s) {
  const row = (name, p) => [name, ms(p.p50), ms(p.p90), ms(p.p99)];
  const lines = [
    `${fmt(s.throughput_tok_s, 0)} output tok/s and ${sig(s.requests_per_s)} requests/s over ${fmt(s.duration_s, 1)} s: ` +
      `${s.completed} completed, ${s.rejected} rejected, at most ${s.max_waiting} waiting.`,
    `KV cache: at most ${s.max_kv_blocks_used} of ${s.kv_blocks} blocks in use; ${s.passes} passes.`,
  ];
  $('serve-summary').replaceChildren(
    table('Predicted latency percentiles at the chosen load', ['', 'p50', 'p90', 'p99'],
      [row('time to first token', s.ttft_ms), row('inter-token latency', s.itl_ms), row('end to end', s.e2e_ms)]),
    ...lines.map((t) => el('p', { class: 'result' }, t)));
}

function renderServeCharts(sweep) {
  const { percentiles, queue } = kvlab.charts;
  if (percentiles) {
    PERCENTILE_SERIES.forEach(({ key: [metric, p] }, i) => {
      percentiles.data.datasets[i].data = sweep.map(({ clients, serve }) => ({ x: clients, y: serve[metric][p] }));
    });
    percentiles.update('none');
  }
  if (queue) {
    const series = sweep[sweep.length - 1].serve.series;
    queue.data.datasets[0].data = series.map((p) => ({ x: p.t_s, y: p.running }));
    queue.data.datasets[1].data = series.map((p) => ({ x: p.t_s, y: p.waiting }));
    queue.update('none');
  }
}

async function runServeLoad(ev) {
  ev.preventDefault();
  const clients = Number($('serve-clients').value);
  $('serve-run').disabled = true;
  setStatus('serve-status', 'Simulating the load…');
  try {
    const sweep = [];
    for (const c of sweepLevels(clients)) sweep.push({ clients: c, serve: (await postJSON('/api/simulate', serveBody(c))).serve });
    const body = serveBody(clients);
    const start = body.serve.ramp_s > 0 ? `started over ${body.serve.ramp_s} s` : 'started together';
    setStatus('serve-status', `${body.model} on ${body.hw}: ${body.serve.requests} requests from ${clients} clients ` +
      `${start}, ${body.serve.parallel} slots; the chart sweeps 1 to ${clients} clients.`);
    kvlab.serve = sweep;  // the browser tests read the results here
    renderServeTable(sweep[sweep.length - 1].serve);
    renderServeCharts(sweep);
  } catch (e) {
    setStatus('serve-status', 'Simulation failed: ' + e.message, true);
  } finally {
    $('serve-run').disabled = false;
  }
}

kvlab.charts.percentiles = percentileChart($('serve-chart'));
kvlab.charts.queue = queueChart($('serve-queue-chart'));
$('serve-form').addEventListener('submit', runServeLoad);
