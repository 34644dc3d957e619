// ort_run.js - ONNX Runtime (onnxruntime-node) on one reference case, for the
// benchmarks (bench/models.sh, bench/runtime.sh).
//
//   node ort_run.js MODEL CASE_DIR RUNS THREADS [PROFILE_PREFIX]
//
// Creates a session (graph optimisation level all, THREADS intra-op threads,
// one inter-op thread), feeds CASE_DIR's input.N.bin (+ .json: name, dtype,
// dims), runs once to warm up, then RUNS times, and prints one line:
//   median_ms maxrss_kb create_ms
// With PROFILE_PREFIX, ORT's profiler records the runs (the warm-up too) and a
// second line names the profile file (Chrome trace JSON, one event per node
// run; written into the working directory).
// With ORT_CREATES=N in the environment, N more sessions of the model are
// created (and released) in this process after the runs, and the line gets a
// fourth field: the median of those warm creates in ms.
const fs = require('fs'), path = require('path');
const ort = require('onnxruntime-node');
const ARR = {float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array,
             int16: Int16Array, uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array,
             int64: BigInt64Array, uint64: BigUint64Array, bool: Uint8Array};
(async () => {
  const [model, dir, runs, threads, prof] = process.argv.slice(2);
  const opts = {graphOptimizationLevel: 'all', intraOpNumThreads: Number(threads || 1),
                interOpNumThreads: 1};
  if (prof) {
    opts.enableProfiling = true;
    opts.profileFilePrefix = prof;
  }
  const c0 = process.hrtime.bigint();
  const s = await ort.InferenceSession.create(model, opts);
  const create = Number(process.hrtime.bigint() - c0) / 1e6;
  const feeds = {};
  for (let i = 0; fs.existsSync(path.join(dir, 'input.' + i + '.bin')); i++) {
    const f = path.join(dir, 'input.' + i + '.bin'), m = JSON.parse(fs.readFileSync(f + '.json'));
    const buf = fs.readFileSync(f), A = ARR[m.dtype];
    const a = new A(buf.length / A.BYTES_PER_ELEMENT);
    new Uint8Array(a.buffer).set(buf);
    feeds[m.name] = new ort.Tensor(m.dtype, a, m.dims);
  }
  await s.run(feeds);
  const t = [];
  for (let r = 0; r < Number(runs); r++) {
    const t0 = process.hrtime.bigint();
    await s.run(feeds);
    t.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  t.sort((a, b) => a - b);
  let warm = '';
  const creates = Number(process.env.ORT_CREATES || 0);
  if (creates > 0) {
    const w = [];
    for (let i = 0; i < creates; i++) {
      const w0 = process.hrtime.bigint();
      const s2 = await ort.InferenceSession.create(model, opts);
      w.push(Number(process.hrtime.bigint() - w0) / 1e6);
      await s2.release();
    }
    w.sort((a, b) => a - b);
    warm = ' ' + w[Math.floor(w.length / 2)].toFixed(2);
  }
  console.log(t[Math.floor(t.length / 2)].toFixed(3) + ' ' + process.resourceUsage().maxRSS + ' ' +
              create.toFixed(1) + warm);
  if (prof) {
    // onnxruntime-node writes <basename(prefix)>_<date>.json into the working
    // directory when the session ends
    if (s.endProfiling)
      s.endProfiling();
    await s.release();
    const base = path.basename(prof) + '_';
    const files = fs.readdirSync('.').filter(f => f.startsWith(base) && f.endsWith('.json'))
                    .map(f => [fs.statSync(f).mtimeMs, f]).sort((a, b) => b[0] - a[0]);
    console.log(files.length ? path.resolve(files[0][1]) : '');
  }
})().catch(e => { console.error(e.message); process.exit(1); });
