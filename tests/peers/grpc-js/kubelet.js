#!/usr/bin/env node
// kubelet.js - the fake kubelet's device-manager side on @grpc/grpc-js, a second gRPC stack next to
// ../fake_kubelet.py (python3-grpcio). It speaks the same line-oriented JSON control protocol on
// stdin/stdout (see fake_kubelet.py's docstring), so check_fake_kubelet.py drives either one.
//
//   node kubelet.js --plugin-dir DIR [--dial-timeout SECONDS]
//
// Models spec/kubernetes-contracts.md §2.2: Register (version, extended resource name, synchronous
// dial-back to <plugin_dir>/<endpoint> with authority "localhost", insecure, wait-for-ready, 10 s, then
// GetDevicePluginOptions; errors are UNKNOWN with the kubelet's text), ListAndWatch recording (capacity =
// all, allocatable = Healthy; a dropped stream marks everything unhealthy, no redial), allocate (the
// kubelet's device selection without a topology manager, GetPreferredAllocation when advertised, one
// container request to Allocate, PreStartContainer when required), release, restart (sockets deleted
// except kubelet_internal_checkpoint, one after the other, cleanup_delay seconds apart if asked, then
// kubelet.sock recreated, allocations kept) and the wait commands.
// Not here: the pod-resources server (set_pods answers an error; use fake_kubelet.py for §2.3).
'use strict';

const fs = require('fs');
const path = require('path');
const readline = require('readline');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTO_ROOT = path.join(__dirname, '..', '..', '..', 'proto');
const pkg = grpc.loadPackageDefinition(protoLoader.loadSync('deviceplugin/v1beta1/api.proto', {
  keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true, includeDirs: [PROTO_ROOT],
})).v1beta1;

const VERSION = 'v1beta1';
const CHECKPOINT = 'kubelet_internal_checkpoint';
const PRE_START_TIMEOUT_MS = 30000;
const NAME_RE = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const DNS1123_SUBDOMAIN_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function isExtendedResourceName(name) { // v1helper.IsExtendedResourceName
  if (!name.includes('/') || name.includes('kubernetes.io/') || name.startsWith('requests.')) return false;
  const q = 'requests.' + name;
  const i = q.indexOf('/');
  const prefix = q.slice(0, i);
  const short = q.slice(i + 1);
  if (short.includes('/') || !short || short.length > 63 || !NAME_RE.test(short)) return false;
  return prefix.length <= 253 && DNS1123_SUBDOMAIN_RE.test(prefix);
}

function codeName(code) {
  return Object.keys(grpc.status).find((k) => grpc.status[k] === code) || 'UNKNOWN';
}

class Failure extends Error {
  constructor(stage, code, details) {
    super(`${stage}: ${code}: ${details}`);
    this.stage = stage; this.code = code; this.details = details;
  }
}

function args() {
  const a = { dialTimeout: 10 };
  const v = process.argv.slice(2);
  for (let i = 0; i < v.length; i++) {
    if (v[i] === '--plugin-dir') a.pluginDir = path.resolve(v[++i]);
    else if (v[i] === '--dial-timeout') a.dialTimeout = Number(v[++i]);
    else throw new Error('unknown argument ' + v[i]);
  }
  if (!a.pluginDir) throw new Error('--plugin-dir is required');
  return a;
}

class FakeKubelet {
  constructor(pluginDir, dialTimeout) {
    this.pluginDir = pluginDir;
    this.dialTimeout = dialTimeout;
    this.resources = new Map(); // name -> {endpoint, connected, registrations, updates, devices: Map}
    this.allocations = [];
    this.registers = [];
    this.waiters = new Set();
    this.epoch = 0;
    this.server = null;
    this.allocChain = Promise.resolve();
  }

  get socket() { return path.join(this.pluginDir, 'kubelet.sock'); }

  async start(cleanupDelay = 0) {
    fs.mkdirSync(this.pluginDir, { recursive: true, mode: 0o750 });
    await this.cleanup(cleanupDelay);
    this.server = new grpc.Server();
    this.server.addService(pkg.Registration.service, { Register: (call, cb) => this.register(call.request, cb) });
    await new Promise((resolve, reject) => this.server.bindAsync('unix:' + this.socket,
      grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
    this.writeCheckpoint();
  }

  stop() {
    this.epoch++;
    for (const r of this.resources.values()) {
      if (r.endpoint) this.closeEndpoint(r.endpoint);
      r.endpoint = null; r.connected = false;
    }
    if (this.server) this.server.forceShutdown();
    this.server = null;
    this.notify();
  }

  // §2.2 item 8; allocations and resource names survive through the checkpoint. cleanupDelay:
  // seconds between two deletions of the cleanup (a slow kubelet), which ends before kubelet.sock.
  async restart(cleanupDelay = 0) {
    this.stop();
    for (const r of this.resources.values()) r.devices = new Map();
    await this.start(cleanupDelay);
  }

  // CleanupPluginDirectory: the names read at once, then each unix socket among them unlinked in
  // turn (whatever file the name holds by then); the checkpoint and directories stay.
  async cleanup(delay = 0) {
    let first = true;
    for (const name of fs.readdirSync(this.pluginDir)) {
      if (name === CHECKPOINT) continue;
      if (delay && !first) await new Promise((resolve) => setTimeout(resolve, delay * 1000));
      const p = path.join(this.pluginDir, name);
      try { if (fs.lstatSync(p).isSocket()) { fs.unlinkSync(p); first = false; } } catch (e) { /* gone already */ }
    }
  }

  writeCheckpoint() {
    const reg = {};
    for (const [n, r] of this.resources) reg[n] = [...r.devices.values()].filter((d) => d.health === 'Healthy').map((d) => d.id);
    const data = {
      Data: {
        PodDeviceEntries: this.allocations.map((a) => ({ PodUID: a.namespace + '/' + a.pod, ContainerName: a.container,
          ResourceName: a.resource, DeviceIDs: { '-1': a.devices }, AllocResp: '' })),
        RegisteredDevices: reg,
      },
      Checksum: 0,
    };
    const p = path.join(this.pluginDir, CHECKPOINT);
    fs.writeFileSync(p + '.tmp', JSON.stringify(data));
    fs.renameSync(p + '.tmp', p);
  }

  // ---- Registration (§2.2) ----
  register(req, cb) {
    const fail = (msg) => {
      this.registers.push({ resource: req.resource_name, version: req.version, endpoint: req.endpoint,
        ok: false, code: 'UNKNOWN', details: msg });
      this.notify();
      cb({ code: grpc.status.UNKNOWN, details: msg }); // grpc-go: a plain error is Unknown + its text
    };
    if (req.version !== VERSION) {
      return fail(`requested API version "${req.version}" is not supported by kubelet. Supported versions are ["${VERSION}"]`);
    }
    if (!isExtendedResourceName(req.resource_name)) return fail(`the ResourceName "${req.resource_name}" is invalid`);
    const client = new pkg.DevicePlugin('unix:' + path.join(this.pluginDir, req.endpoint),
      grpc.credentials.createInsecure(), { 'grpc.default_authority': 'localhost' });
    client.waitForReady(Date.now() + this.dialTimeout * 1000, (err) => {
      if (err) { client.close(); return fail('failed to dial device plugin: context deadline exceeded'); }
      client.GetDevicePluginOptions({}, (err2, options) => { // PluginConnected, no deadline
        if (err2) {
          client.close();
          return fail(`failed to get device plugin options: rpc error: code = ${codeName(err2.code)} desc = ${err2.details}`);
        }
        let res = this.resources.get(req.resource_name);
        if (!res) {
          res = { endpoint: null, connected: false, registrations: 0, updates: 0, devices: new Map() };
          this.resources.set(req.resource_name, res);
        }
        const old = res.endpoint;
        const ep = { resource: req.resource_name, endpoint: req.endpoint, client, options, stream: null, stopped: false };
        res.endpoint = ep; res.registrations++; res.connected = false;
        this.registers.push({ resource: req.resource_name, version: req.version, endpoint: req.endpoint,
          ok: true, code: 'OK', details: '' });
        if (old) this.closeEndpoint(old);
        cb(null, {});
        this.notify();
        setImmediate(() => this.listAndWatch(ep, this.epoch)); // go s.runClient(...)
      });
    });
  }

  closeEndpoint(ep) {
    ep.stopped = true;
    if (ep.stream) ep.stream.cancel();
    ep.client.close();
  }

  listAndWatch(ep, epoch) {
    const res = this.resources.get(ep.resource);
    const current = () => this.epoch === epoch && res.endpoint === ep;
    if (!current()) return;
    const stream = ep.client.ListAndWatch({});
    ep.stream = stream;
    res.connected = true;
    this.notify();
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      if (!current()) return;
      // PluginDisconnected -> markResourceUnhealthy; never redialled
      res.connected = false; ep.stopped = true;
      for (const d of res.devices.values()) d.health = 'Unhealthy';
      this.notify();
    };
    stream.on('data', (msg) => {
      if (!current()) return;
      res.devices = new Map(msg.devices.map((d) => [d.ID, { id: d.ID, health: d.health,
        numa: d.topology ? d.topology.nodes.map((n) => Number(n.ID)) : [] }]));
      res.updates++;
      this.writeCheckpoint();
      this.notify();
    });
    stream.on('error', end);
    stream.on('end', end);
  }

  // ---- state and waits ----
  allocated(resource) {
    return new Set(this.allocations.filter((a) => a.resource === resource).flatMap((a) => a.devices));
  }

  resState(name) {
    const r = this.resources.get(name);
    if (!r) return null;
    const devs = [...r.devices.values()];
    const healthy = devs.filter((d) => d.health === 'Healthy').map((d) => d.id);
    const o = r.endpoint ? r.endpoint.options : null;
    return {
      registered: !!(r.endpoint && !r.endpoint.stopped), connected: r.connected, registrations: r.registrations,
      updates: r.updates, endpoint: r.endpoint ? r.endpoint.endpoint : null,
      options: o ? { pre_start_required: o.pre_start_required,
        get_preferred_allocation_available: o.get_preferred_allocation_available } : null,
      devices: devs.map((d) => ({ ...d })), healthy, unhealthy: devs.map((d) => d.id).filter((d) => !healthy.includes(d)),
      capacity: devs.length, allocatable: healthy.length, allocated: [...this.allocated(name)].sort(),
    };
  }

  state() {
    const resources = {};
    for (const n of this.resources.keys()) resources[n] = this.resState(n);
    return { resources, allocations: this.allocations.map((a) => ({ ...a })), registers: this.registers.map((r) => ({ ...r })) };
  }

  notify() { for (const w of [...this.waiters]) w(); }

  wait(resource, pred, timeout, what) {
    return new Promise((resolve, reject) => {
      let timer = null;
      const check = () => {
        const st = this.resState(resource);
        if (st && pred(st)) {
          this.waiters.delete(check); clearTimeout(timer); resolve(st);
          return true;
        }
        return false;
      };
      if (check()) return;
      this.waiters.add(check);
      timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`timed out after ${timeout}s waiting for ${what} of ${resource} (now ${JSON.stringify(this.resState(resource))})`));
      }, timeout * 1000);
    });
  }

  // ---- allocation (§2.2 item 6): one at a time, as pod admission is ----
  allocate(a) {
    const run = this.allocChain.then(() => this.allocateOne(a));
    this.allocChain = run.catch(() => {});
    return run;
  }

  async allocateOne({ resource, size = null, device_ids: deviceIds = null, reuse = [], namespace = 'default',
    pod = null, container = 'main', publish = 'after' }) {
    if (!['after', 'before', 'none'].includes(publish)) throw new Error('publish must be after, before or none');
    const out = { devices: null, preferred_request: null, preferred: null, response: null, pre_start: false };
    const failed = (f) => ({ ...out, ok: false, stage: f.stage, code: f.code, details: f.details, error: f.message });
    pod = pod || `pod-${this.allocations.length + 1}`;
    const res = this.resources.get(resource);
    const ep = res ? res.endpoint : null;
    let chosen;
    let record;
    try {
      chosen = deviceIds ? [...deviceIds] : await this.select(resource, res, size, reuse, out);
      if (!ep) throw new Failure('select', null, `unknown Device Plugin ${resource}`);
      record = { namespace, pod, container, resource, devices: chosen, published: publish === 'before' };
      this.allocations.push(record);
      this.notify();
    } catch (f) {
      if (f instanceof Failure) return failed(f);
      throw f;
    }
    let resp;
    try {
      if (ep.stopped) throw new Failure('Allocate', null, `endpoint stopped for ${resource}`);
      resp = await new Promise((resolve, reject) => ep.client.Allocate(
        { container_requests: [{ devices_ids: chosen }] },
        (err, r) => (err ? reject(new Failure('Allocate', codeName(err.code), err.details)) : resolve(r))));
      if (!resp.container_responses.length) {
        throw new Failure('Allocate', null, `no containers return in allocation response ${JSON.stringify(resp)}`);
      }
    } catch (f) {
      this.allocations = this.allocations.filter((x) => x !== record); // the ids are free again
      this.notify();
      if (f instanceof Failure) return failed(f);
      throw f;
    }
    const cr = resp.container_responses[0];
    out.devices = chosen;
    out.response = { envs: cr.envs || {}, mounts: cr.mounts || [], devices: cr.devices || [],
      annotations: cr.annotations || {}, cdi_devices: cr.cdi_devices || [] };
    record.published = publish !== 'none'; // podDevices.insert happens only after Allocate returns
    this.writeCheckpoint();
    this.notify();
    if (ep.options.pre_start_required) {
      try {
        await new Promise((resolve, reject) => ep.client.PreStartContainer({ devices_ids: chosen },
          { deadline: Date.now() + PRE_START_TIMEOUT_MS },
          (err) => (err ? reject(new Failure('PreStartContainer', codeName(err.code), err.details)) : resolve())));
        out.pre_start = true;
      } catch (f) {
        if (f instanceof Failure) return failed(f);
        throw f;
      }
    }
    return { ...out, ok: true };
  }

  async select(resource, res, size, reuse, out) { // devicesToAllocate, no topology hint
    if (!res) throw new Failure('select', null, `cannot allocate unregistered device ${resource}`);
    const healthy = [...res.devices.values()].filter((d) => d.health === 'Healthy').map((d) => d.id);
    if (!healthy.length) throw new Failure('select', null, `no healthy devices present; cannot allocate unhealthy devices ${resource}`);
    if (size === null) throw new Failure('select', null, 'allocate needs size or device_ids');
    const allocated = [];
    const take = (devs) => {
      for (const d of devs) {
        if (allocated.length === size) break;
        if (!allocated.includes(d)) allocated.push(d);
      }
      return allocated.length === size;
    };
    if (take(reuse)) return allocated;
    const inUse = this.allocated(resource);
    const available = healthy.filter((d) => !inUse.has(d) && !allocated.includes(d)).sort();
    if (available.length < size - allocated.length) {
      throw new Failure('select', null, `requested number of devices unavailable for ${resource}. Requested: ${size - allocated.length}, Available: ${available.length}`);
    }
    const ep = res.endpoint;
    if (ep && ep.options.get_preferred_allocation_available) {
      if (ep.stopped) throw new Failure('GetPreferredAllocation', null, `endpoint stopped for ${resource}`);
      const req = { available: [...new Set([...available, ...allocated])].sort(), must_include: [...allocated], size };
      out.preferred_request = req;
      const resp = await new Promise((resolve, reject) => ep.client.GetPreferredAllocation({ container_requests: [{
        available_deviceIDs: req.available, must_include_deviceIDs: req.must_include, allocation_size: size }] },
      (err, r) => (err ? reject(new Failure('GetPreferredAllocation', codeName(err.code),
        `device plugin GetPreferredAllocation rpc failed with err: ${err.details}`)) : resolve(r))));
      if (resp.container_responses.length) {
        out.preferred = [...resp.container_responses[0].deviceIDs];
        if (take(out.preferred.filter((d) => available.includes(d)))) return allocated;
      }
    }
    if (take(available)) return allocated;
    throw new Failure('select', null, 'unexpectedly allocated less resources than required');
  }

  release(namespace, pod) {
    this.allocations = this.allocations.filter((a) => a.namespace !== namespace || a.pod !== pod);
    this.writeCheckpoint();
    this.notify();
  }
}

async function main() {
  const a = args();
  const k = new FakeKubelet(a.pluginDir, a.dialTimeout);
  await k.start();
  const emit = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
  emit({ event: 'ready', impl: 'node-grpc-js', kubelet_socket: k.socket, podres_socket: null });
  const handle = async (msg) => {
    const { id, cmd, timeout = 10, ...x } = msg;
    try {
      let reply;
      switch (cmd) {
        case 'state': reply = k.state(); break;
        case 'wait_registered': reply = { resource: await k.wait(x.resource, (s) => s.registrations >= (x.count || 1), timeout, `registration ${x.count || 1}`) }; break;
        case 'wait_healthy': reply = { resource: await k.wait(x.resource, (s) => s.allocatable === x.n, timeout, `${x.n} healthy devices`) }; break;
        case 'wait_update': reply = { resource: await k.wait(x.resource, (s) => s.updates > (x.after || 0), timeout, `update > ${x.after || 0}`) }; break;
        case 'wait_disconnected': reply = { resource: await k.wait(x.resource, (s) => !s.registered && s.registrations > 0, timeout, 'the end of ListAndWatch') }; break;
        case 'allocate': emit({ ...(await k.allocate(x)), id }); return;
        case 'release': k.release(x.namespace, x.pod); reply = {}; break;
        case 'restart': await k.restart(Number(x.cleanup_delay || 0)); reply = {}; break;
        case 'set_pods': throw new Error('no pod-resources server in the grpc-js fake (use fake_kubelet.py)');
        case 'quit': emit({ id, ok: true }); k.stop(); process.exit(0); return;
        default: throw new Error(`unknown command ${JSON.stringify(cmd)}`);
      }
      emit({ ...reply, id, ok: true });
    } catch (e) {
      emit({ id, ok: false, error: `${e.name}: ${e.message}` });
    }
  };
  const rl = readline.createInterface({ input: process.stdin });
  rl.on('line', (line) => {
    if (!line.trim()) return;
    let msg;
    try { msg = JSON.parse(line); } catch (e) { emit({ id: null, ok: false, error: `bad JSON: ${e.message}` }); return; }
    handle(msg);
  });
  rl.on('close', () => { k.stop(); process.exit(0); });
}

main().catch((e) => { process.stderr.write(`${e.stack}\n`); process.exit(1); });
