// gen_model_refs.js - run ONNX Runtime (onnxruntime-node) on reference cases
// whose inputs tools/gen_model_refs.py has written (docs/testing_models.md).
//
//   NODE_PATH=<dir>/node_modules node gen_model_refs.js CASES.json MODELS_DIR OUT_DIR CASE...
//
// For each CASE: load MODELS_DIR/<model_file> with the session settings of
// CASES.json ("session": CPU, graph optimisations disabled, one thread), feed
// OUT_DIR/<case>/input.N.bin (dtype and dims from input.N.bin.json), check that
// the version of onnxruntime-node is the pinned one and that the model's outputs
// are the case's outputs, then write OUT_DIR/<case>/output.N.bin (raw
// little-endian, row-major) + output.N.bin.json, and add the outputs, the
// environment and ORT's timings on this machine ("inference": the reference
// session, and a session with optimisations on, for bench/models.sh) to
// OUT_DIR/<case>/manifest.json.  Exit 0; 1 with the case and
// the reason on stderr; 3 when onnxruntime-node cannot be loaded here.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const crypto = require('crypto');

const ARRAYS = {
  float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array,
  int16: Int16Array, uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array,
  int64: BigInt64Array, uint64: BigUint64Array, bool: Uint8Array,
};
// onnxruntime-node tensor type -> sidecar dtype name
const DTYPES = {
  float32: 'float32', float64: 'float64', int8: 'int8', uint8: 'uint8', int16: 'int16',
  uint16: 'uint16', int32: 'int32', uint32: 'uint32', int64: 'int64', uint64: 'uint64',
  bool: 'bool',
};

const TIMING_RUNS = 3;

function msSince(t0) {
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

function round3(x) {
  return Math.round(x * 1000) / 1000;
}

function fail(msg, status) {
  process.stderr.write('gen_model_refs.js: ' + msg + '\n');
  process.exit(status || 1);
}

function readJson(p) {
  try {
    return JSON.parse(fs.readFileSync(p, 'utf8'));
  } catch (e) {
    fail(p + ': ' + e.message);
  }
  return null;
}

function writeJson(p, obj) {
  fs.writeFileSync(p, JSON.stringify(obj, null, 1) + '\n');
}

async function main() {
  const argv = process.argv.slice(2);
  if (argv.length < 4) fail('usage: gen_model_refs.js CASES.json MODELS_DIR OUT_DIR CASE...');
  const [casesPath, models, out, ...names] = argv;
  if (os.endianness() !== 'LE') fail('this machine is big-endian; reference files are little-endian');
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    // this platform has no usable ONNX Runtime build: exit 3 ("unavailable")
    fail('cannot load onnxruntime-node (NODE_PATH=' + (process.env.NODE_PATH || '') + '): ' + e.message, 3);
  }
  const spec = readJson(casesPath);
  const version = (ort.env && ort.env.versions && ort.env.versions.node) || 'unknown';
  if (spec.onnxruntime_node && version !== spec.onnxruntime_node) {
    fail('onnxruntime-node ' + version + ' loaded, the cases want ' + spec.onnxruntime_node);
  }
  const opts = Object.assign({}, spec.session);
  const byName = new Map(spec.cases.map((c) => [c.case, c]));
  const environment = {
    onnxruntime_node: version, node: process.version,
    platform: os.platform() + ' ' + os.arch(), cpu: (os.cpus()[0] || {}).model || 'unknown',
  };
  const producedBy = 'onnxruntime-node ' + version + ' CPU EP, graphOptimizationLevel=' +
    opts.graphOptimizationLevel + ', intraOpNumThreads=' + opts.intraOpNumThreads;

  for (const name of names) {
    const c = byName.get(name);
    if (!c) fail(name + ': not a case of ' + casesPath);
    const dir = path.join(out, name);
    const t0 = process.hrtime.bigint();
    let session;
    const modelPath = path.join(models, c.model_file);
    try {
      session = await ort.InferenceSession.create(modelPath, opts);
    } catch (e) {
      fail(name + ': cannot load ' + c.model_file + ': ' + e.message);
    }
    const createMs = msSince(t0);
    const feeds = {};
    c.inputs.forEach((t, i) => {
      const file = path.join(dir, 'input.' + i + '.bin');
      const meta = readJson(file + '.json');
      const Arr = ARRAYS[meta.dtype];
      if (!Arr) fail(name + ': input ' + i + ': unsupported dtype ' + meta.dtype);
      const buf = fs.readFileSync(file);
      const count = meta.dims.reduce((a, b) => a * b, 1);
      if (buf.length !== count * Arr.BYTES_PER_ELEMENT) {
        fail(name + ': ' + file + ': ' + buf.length + ' bytes, dims ' + JSON.stringify(meta.dims) +
          ' need ' + count * Arr.BYTES_PER_ELEMENT);
      }
      const data = new Arr(count);
      new Uint8Array(data.buffer).set(buf);
      feeds[meta.name] = new ort.Tensor(meta.dtype, data, meta.dims);
    });
    const want = c.outputs.map((t) => t.name);
    if (JSON.stringify(session.outputNames) !== JSON.stringify(want)) {
      fail(name + ': model outputs ' + JSON.stringify(session.outputNames) + ', the case lists ' +
        JSON.stringify(want));
    }
    let results;
    const t1 = process.hrtime.bigint();
    try {
      results = await session.run(feeds);
    } catch (e) {
      fail(name + ': ONNX Runtime: ' + e.message);
    }
    const inference = [{
      level: opts.graphOptimizationLevel, intraOpNumThreads: opts.intraOpNumThreads,
      in_process_create_ms: round3(createMs), first_run_ms: round3(msSince(t1)), runs: 1,
    }];
    // ORT's own figures on this machine with its optimisations on (one
    // thread), for bench/models.sh; not part of the reference
    try {
      const t2 = process.hrtime.bigint();
      const fast = await ort.InferenceSession.create(modelPath, Object.assign({}, opts,
        {graphOptimizationLevel: 'all'}));
      const create = msSince(t2);
      const times = [];
      for (let r = 0; r < TIMING_RUNS; r++) {
        const t3 = process.hrtime.bigint();
        await fast.run(feeds);
        times.push(msSince(t3));
      }
      times.sort((a, b) => a - b);
      inference.push({
        level: 'all', intraOpNumThreads: opts.intraOpNumThreads, in_process_create_ms: round3(create),
        median_ms: round3(times[(times.length - 1) >> 1]), min_ms: round3(times[0]), runs: TIMING_RUNS,
      });
      if (fast.release) await fast.release();
    } catch (e) {
      process.stderr.write('gen_model_refs.js: ' + name + ': no timings with optimisations on: ' +
        e.message + '\n');
    }
    const manifest = readJson(path.join(dir, 'manifest.json'));
    session.outputNames.forEach((oname, i) => {
      const t = results[oname];
      const dtype = DTYPES[t.type];
      if (!dtype) fail(name + ': output ' + oname + ' has unsupported type ' + t.type);
      const d = t.data;
      const bytes = Buffer.from(d.buffer, d.byteOffset, d.byteLength);
      const file = 'output.' + i + '.bin';
      fs.writeFileSync(path.join(dir, file), bytes);
      const meta = {
        name: oname, role: 'output', index: i, dtype, dims: Array.from(t.dims, Number), file,
        byte_length: bytes.length, sha256: crypto.createHash('sha256').update(bytes).digest('hex'),
        endianness: 'little', layout: 'row-major', produced_by: producedBy,
      };
      writeJson(path.join(dir, file + '.json'), meta);
      manifest.tensors.push(meta);
    });
    if (session.release) await session.release();
    manifest.inference = inference;
    manifest.environment = environment;
    manifest.generated_by = 'tools/gen-model-refs.sh';
    writeJson(path.join(dir, 'manifest.json'), manifest);
    const ms = msSince(t0);
    console.log('gen_model_refs: ' + name + ': ' + session.outputNames.length + ' output(s), ' +
      ms.toFixed(0) + ' ms');
  }
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)));
