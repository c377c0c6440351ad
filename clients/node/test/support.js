'use strict';
// The real smartico-sim and smarticod as subprocesses for the Node client's tests (as
// clients/python/tests/support.py). Binaries: $SMARTICOD_BIN, $SMARTICO_SIM_BIN, else
// <repo>/.build/debug. Every wait is bounded.
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const REPO = path.resolve(__dirname, '..', '..', '..');
const LABEL_KEY = '6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f-2';

function binary(variable, name) {
  const file = process.env[variable] || path.join(REPO, '.build', 'debug', name);
  try { fs.accessSync(file, fs.constants.X_OK); } catch {
    throw new Error(`${name} not found at ${file}: build it (swift build) or set $${variable}`);
  }
  return file;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitUntil(condition, timeout = 15000, interval = 50) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const value = await condition();
    if (value) return value;
    if (Date.now() >= deadline) return null;
    await sleep(interval);
  }
}

/** One NDJSON request on its own connection; the answer object. */
function lineRequest(socketPath, request, timeout = 15000) {
  return new Promise((resolve, reject) => {
    const s = net.createConnection(socketPath);
    let data = '';
    const timer = setTimeout(() => { s.destroy(); reject(new Error(`no answer on ${socketPath} within ${timeout} ms`)); }, timeout);
    s.setEncoding('utf8');
    s.on('connect', () => s.write(JSON.stringify(request) + '\n'));
    s.on('data', (chunk) => {
      data += chunk;
      const i = data.indexOf('\n');
      if (i >= 0) { clearTimeout(timer); s.destroy(); resolve(JSON.parse(data.slice(0, i))); }
    });
    s.on('error', (e) => { clearTimeout(timer); reject(e); });
  });
}

function waitExit(child, timeout = 20000) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), timeout);
    child.once('exit', (code) => { clearTimeout(timer); resolve(code); });
  });
}

class Rig {
  static async start() {
    const rig = new Rig();
    rig.dir = fs.mkdtempSync('/tmp/smnode-');
    fs.chmodSync(rig.dir, 0o755);
    rig.socketPath = path.join(rig.dir, 'd.sock');
    rig.controlPath = path.join(rig.dir, 'sim.sock');
    rig.configPath = path.join(rig.dir, 'config.json');
    rig.logPath = path.join(rig.dir, 'smarticod.log');
    const simLog = fs.openSync(path.join(rig.dir, 'sim.log'), 'a');
    rig.sim = spawn(binary('SMARTICO_SIM_BIN', 'smartico-sim'), ['--port', '0', '--control', rig.controlPath],
      { stdio: ['ignore', 'pipe', simLog], env: { PATH: '/usr/bin:/bin' } });
    fs.closeSync(simLog);
    const lines = await new Promise((resolve) => {
      let out = '';
      const timer = setTimeout(() => resolve(out.split('\n')), 20000);
      rig.sim.stdout.setEncoding('utf8');
      rig.sim.stdout.on('data', (chunk) => {
        out += chunk;
        if (out.split('\n').length > 3) { clearTimeout(timer); resolve(out.split('\n')); }
      });
    });
    if (!lines[1] || !lines[1].startsWith('ws')) {
      await rig.close();
      throw new Error(`smartico-sim did not print its three lines: ${JSON.stringify(lines)}`);
    }
    rig.serverURL = `${lines[1]}?master&domain=test.example&version=1.0.0`;
    return rig;
  }

  writeConfig({ user = 'alice', hash = 'h', socket = {} } = {}) {
    const userObject = {};
    if (user) userObject.ext_user_id = user;
    if (hash) userObject.hash = hash;
    fs.writeFileSync(this.configPath, JSON.stringify({
      server: { url: this.serverURL, label_key: LABEL_KEY },
      user: userObject,
      session: { connect_timeout_s: 5, response_timeout_s: 5, reconnect: { initial_ms: 50, max_ms: 300, multiplier: 2.0 } },
      socket: { path: this.socketPath, ...socket },
      state_dir: path.join(this.dir, 'state'),
      log: { level: 'info' },
    }));
  }

  async startDaemon() {
    const log = fs.openSync(this.logPath, 'a');
    this.daemon = spawn(binary('SMARTICOD_BIN', 'smarticod'), ['--config', this.configPath],
      { stdio: ['ignore', 'ignore', log], env: { PATH: '/usr/bin:/bin' } });
    fs.closeSync(log);
    const ok = await waitUntil(async () => {
      if (this.daemon.exitCode !== null) throw new Error(`smarticod exited with ${this.daemon.exitCode}: ${this.log()}`);
      try { return (await lineRequest(this.socketPath, { id: 1, op: 'hello' }, 5000)).ok === true; } catch { return false; }
    }, 20000);
    if (!ok) throw new Error(`smarticod did not answer within 20 s: ${this.log()}`);
  }

  async status() {
    return (await lineRequest(this.socketPath, { id: 1, op: 'status' })).result;
  }

  async waitIdentified(user = 'alice') {
    const ok = await waitUntil(async () => {
      const s = (await lineRequest(this.socketPath, { id: 1, op: 'status' })).result;
      return s.state === 'ready' && s.user && s.user.ext_user_id === user && s.user.identified === true;
    }, 20000);
    if (!ok) throw new Error(`smarticod did not identify ${user} within 20 s: ${this.log()}`);
  }

  async stopDaemon(signal = 'SIGTERM') {
    if (!this.daemon) return null;
    const child = this.daemon;
    this.daemon = null;
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    return waitExit(child);
  }

  async control(request) {
    const answer = await lineRequest(this.controlPath, request);
    if (answer.ok !== true) throw new Error(`simulator control ${JSON.stringify(request)} failed: ${JSON.stringify(answer)}`);
    return answer;
  }

  async emitEngagement(user = 'alice') {
    const answer = await this.control({ op: 'emit', kind: 'engagement', user });
    const message = (answer.deliveries && answer.deliveries[0] && answer.deliveries[0].message) || (answer.queued_pending && answer.queued_pending[0]);
    if (!message) throw new Error(`emit delivered nothing: ${JSON.stringify(answer)}`);
    return message.engagement_uid;
  }

  async received(cids) {
    return (await this.control({ op: 'received', cid: cids })).messages.map((e) => e.message).filter(Boolean);
  }

  log() {
    try { return fs.readFileSync(this.logPath, 'utf8').slice(-3000); } catch { return ''; }
  }

  async close() {
    await this.stopDaemon('SIGKILL');
    if (this.sim && this.sim.exitCode === null) {
      this.sim.kill('SIGKILL');
      await waitExit(this.sim);
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

module.exports = { Rig, waitUntil, sleep, binary, os };
