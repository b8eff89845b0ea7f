#!/usr/bin/env node
// ort-nodes.js MODEL.onnx [--threads N] [--runs N] - ONNX Runtime's time per node, to set beside
// `kinfer bench --profile --json` (its "steps"): where the peer's kernels are faster than kinfer's
// on this CPU, and where kinfer's lead comes from fusion instead. Runs the model as
// SHARED/tools/ort-bench.js does (weights written from case.json's onnx_data_bytes into a
// temporary copy, all graph optimisations, one inter-op thread) with ONNX Runtime's profiler on,
// then prints each node's lowest kernel time over the runs, in run order, and their sum. ONNX
// Runtime names its fused nodes after their last operator (a convolution with its clip:
// ".../Clip_output_0_nchwc"); the lowest time of each node is taken separately, so the sum is a
// floor, lower than any whole run. A benchmark, not a test: run it on a quiet machine, with
// NODE_PATH pointing at onnxruntime-node (see ort-bench.js).
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

let ort;
try {
  ort = require('onnxruntime-node');
} catch (e) {
  console.error('ort-nodes: onnxruntime-node is not installed. Run:\n  npm install --prefix /tmp/ort --ignore-scripts onnxruntime-node@1.30.0\n' +
                'and start this script with NODE_PATH=/tmp/ort/node_modules');
  process.exit(2);
}

function arg(name, def) {
  const i = process.argv.indexOf(name);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : def;
}

async function main() {
  const model = process.argv[2];
  if (!model || model.startsWith('--')) {
    console.error('usage: ort-nodes.js MODEL.onnx [--threads N] [--runs N]');
    process.exit(2);
  }
  const threads = parseInt(arg('--threads', '2'), 10);
  const runs = parseInt(arg('--runs', '30'), 10);
  if (!(threads >= 1) || !(runs >= 1)) {
    console.error('ort-nodes: --threads and --runs take a positive number');
    process.exit(2);
  }
  const meta = JSON.parse(fs.readFileSync(path.join(path.dirname(model), 'case.json'), 'utf8'));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ort-nodes-'));
  try {
    const copy = path.join(dir, 'model.onnx');
    fs.copyFileSync(model, copy);
    const bytes = meta.onnx_data_bytes || 0;
    const weights = new Float32Array(Math.ceil(bytes / 4));
    let seed = 12345;
    for (let i = 0; i < weights.length; i++) {
      seed = (seed * 1103515245 + 12345) >>> 0;
      weights[i] = ((seed >>> 8) / 16777216 - 0.5) * 0.1;
    }
    fs.writeFileSync(path.join(dir, 'model.onnx.data'), Buffer.from(weights.buffer, 0, bytes));
    const session = await ort.InferenceSession.create(copy, {
      intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential',
      graphOptimizationLevel: 'all', enableProfiling: true,
      profileFilePrefix: path.join(dir, 'profile'),
    });
    const feeds = {};
    meta.input_shapes.forEach((shape, i) => { // as ort-bench.js fills them
      const n = shape.reduce((a, b) => a * b, 1);
      const m = session.inputMetadata ? session.inputMetadata[i] : null;
      if (m && (m.type === 'int64' || m.type === 'tensor(int64)')) { // token ids and the like
        const data = new BigInt64Array(n);
        for (let j = 0; j < n; j++) data[j] = BigInt(j % 10);
        feeds[session.inputNames[i]] = new ort.Tensor('int64', data, shape);
        return;
      }
      const data = new Float32Array(n);
      for (let j = 0; j < n; j++) data[j] = Math.sin(j * 0.37);
      feeds[session.inputNames[i]] = new ort.Tensor('float32', data, shape);
    });
    for (let i = 0; i < runs; i++) await session.run(feeds);
    session.endProfiling();
    // the binding does not return the file's name: it is the one JSON file in dir (or, in
    // versions that ignore the prefix's directory, in the working directory)
    const pick = (d) => fs.readdirSync(d).filter((f) => f.startsWith('profile') && f.endsWith('.json'))
      .map((f) => path.join(d, f));
    const files = pick(dir).concat(pick(process.cwd()));
    if (files.length === 0) throw new Error('no profile file written');
    const events = JSON.parse(fs.readFileSync(files[0], 'utf8'));
    if (!files[0].startsWith(dir)) fs.rmSync(files[0], {force: true});
    const best = new Map();
    for (const e of events) {
      if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
      const name = e.name.slice(0, -'_kernel_time'.length);
      best.set(name, Math.min(best.has(name) ? best.get(name) : Infinity, e.dur));
    }
    let sum = 0;
    for (const [name, us] of best) {
      sum += us;
      console.log(`${(us / 1000).toFixed(3)} ms  ${name}`);
    }
    console.log(`${meta.name}: ${best.size} nodes, sum of their lowest times ${(sum / 1000).toFixed(3)} ms ` +
                `(${runs} runs, ${threads} threads)`);
  } finally {
    fs.rmSync(dir, {recursive: true, force: true});
  }
}

main().catch((e) => { console.error('ort-nodes: ' + e.message); process.exit(1); });
