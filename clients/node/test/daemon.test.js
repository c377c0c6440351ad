'use strict';
// The Node client against the real smarticod and smartico-sim (subprocesses).
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const { Rig, waitUntil } = require('./support');
const smarticod = require('..');
const { Client, BadRequest, UnknownOp, NotPermitted, ServerError, DaemonUnavailable, SmarticoError } = smarticod;

const TIMEOUT = 20000;

async function withRig(t, config = {}) {
  const rig = await Rig.start();
  t.after(() => rig.close());
  rig.writeConfig(config);
  await rig.startDaemon();
  return rig;
}

function client(t, rig, options = {}) {
  const c = new Client({ path: rig.socketPath, timeout: TIMEOUT, ...options });
  t.after(() => c.close());
  return c;
}

async function nextEvent(subscription, name, rig, timeout = TIMEOUT) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const remaining = deadline - Date.now();
    const event = remaining > 0 ? await subscription.get(remaining) : null;
    if (event === null) assert.fail(`no ${name || 'event'} within ${timeout} ms\n${rig ? rig.log() : ''}`);
    if (!name || event.name === name) return event;
  }
}

async function assertQuiet(subscription, name, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const remaining = deadline - Date.now();
    if (remaining <= 0) return;
    const event = await subscription.get(remaining);
    if (event && event.name === name) assert.fail(`unexpected ${name} seq ${event.seq}`);
  }
}

test('identify, then engagements arrive as typed events', async (t) => {
  const rig = await withRig(t, { user: null, hash: null });
  const c = client(t, rig);
  const subscription = await c.subscribe({ types: ['engagement', 'identified'], follow: false });
  const identified = await c.identify('alice', 'h');
  assert.equal(identified.ext_user_id, 'alice');
  assert.equal((await nextEvent(subscription, 'identified', rig)).data.ext_user_id, 'alice');
  const uids = [await rig.emitEngagement(), await rig.emitEngagement()];
  const events = [await nextEvent(subscription, 'engagement', rig), await nextEvent(subscription, 'engagement', rig)];
  assert.deepEqual(events.map((e) => e.engagementUid), uids);
  assert.deepEqual(events.map((e) => e.activityType), [30, 30]);
  assert.ok(events[0].seq < events[1].seq && events[0].journaled);
});

test('report reaches the server, ack moves the durable cursor', async (t) => {
  const rig = await withRig(t);
  await rig.waitIdentified();
  const c = client(t, rig);
  const subscription = await c.subscribe({ types: ['engagement'], durable: 'node-rt', autoAck: false });
  const uid = await rig.emitEngagement();
  const event = await nextEvent(subscription, 'engagement', rig);
  await c.report('impression', event);
  await c.report('action', event, { action: 'dp:gf_levels' });
  const reports = await waitUntil(async () => {
    const found = (await rig.received([103, 104, 106])).filter((m) => m.engagement_uid === uid);
    return found.length >= 2 ? found : null;
  }, TIMEOUT);
  assert.ok(reports, `no reports of ${uid}\n${rig.log()}`);
  assert.deepEqual(reports.map((m) => m.cid), [103, 104]);
  assert.equal(reports[1].action, 'dp:gf_levels');
  assert.equal(await subscription.ack(event), event.seq);
  await subscription.close();
  const other = client(t, rig);
  const again = await other.subscribe({ types: ['engagement'], durable: 'node-rt', follow: false });
  await assertQuiet(again, 'engagement', 500);
});

test('a durable subscription resumes after a disconnect: unacknowledged again, nothing lost', async (t) => {
  const rig = await withRig(t);
  await rig.waitIdentified();
  const first = client(t, rig);
  const subscription = await first.subscribe({ types: ['engagement'], durable: 'node-kiosk', autoAck: false, follow: false });
  const uids = [await rig.emitEngagement(), await rig.emitEngagement()];
  const e1 = await nextEvent(subscription, 'engagement', rig);
  await subscription.ack(e1);
  const e2 = await nextEvent(subscription, 'engagement', rig);
  assert.deepEqual([e1.engagementUid, e2.engagementUid], uids);
  first.close();
  uids.push(await rig.emitEngagement());
  const second = client(t, rig);
  const resumed = await second.subscribe({ types: ['engagement'], durable: 'node-kiosk', follow: false });
  const got = [await nextEvent(resumed, 'engagement', rig), await nextEvent(resumed, 'engagement', rig)];
  assert.deepEqual(got.map((e) => e.engagementUid), uids.slice(1));
  await assertQuiet(resumed, 'engagement', 500);
});

test('follow across a daemon restart: exactly once, in order', async (t) => {
  const rig = await withRig(t);
  await rig.waitIdentified();
  const c = client(t, rig);
  const subscription = await c.subscribe({ types: ['engagement'] });
  const uids = [await rig.emitEngagement()];
  const got = [await nextEvent(subscription, 'engagement', rig)];
  assert.equal(await rig.stopDaemon(), 0);
  assert.equal(await subscription.get(700), null);
  uids.push(await rig.emitEngagement(), await rig.emitEngagement());
  await rig.startDaemon();
  uids.push(await rig.emitEngagement());
  for (let i = 0; i < 3; i++) got.push(await nextEvent(subscription, 'engagement', rig));
  assert.deepEqual(got.map((e) => e.engagementUid), uids);
  await assertQuiet(subscription, 'engagement', 1000);
  assert.ok(subscription.reconnects >= 1);
});

test('typed errors: BadRequest, UnknownOp, ServerError, and the api op', async (t) => {
  const rig = await withRig(t, { user: null, hash: null });
  const c = client(t, rig);
  await assert.rejects(c.report('shown', 'uid-1'), (e) => e instanceof BadRequest && e.code === 'bad_request' && e.detail.includes('"kind"'));
  await assert.rejects(c.call('frobnicate'), UnknownOp);
  await assert.rejects(c.api('no.such.call', { limit: 5 }), (e) => e instanceof BadRequest && /no\.such\.call/.test(e.detail));
  // No user identified: a call that needs one is refused at once.
  await assert.rejects(c.api('missions.list'), (e) => e instanceof smarticod.NotReady && /identif/.test(e.detail));
  await rig.control({ op: 'fault', kind: 'reject_identify', errCode: 100000, errMsg: 'hash is not valid' });
  await assert.rejects(c.identify('mallory', 'wrong'), (e) => e instanceof ServerError && e.errCode === 100000 && e.errMsg === 'hash is not valid');
  assert.equal((await c.hello()).api, 1);
});

test('a read-only peer gets NotPermitted for identify', async (t) => {
  const rig = await withRig(t, { socket: { mode: '0666' } });
  const script = `
    const { Client, NotPermitted } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
    (async () => {
      const c = new Client({ path: ${JSON.stringify(rig.socketPath)}, timeout: 10000 });
      await c.hello();
      try { await c.identify('alice', 'h'); console.log('identify succeeded'); process.exitCode = 1; }
      catch (e) { console.log(e instanceof NotPermitted ? 'not_permitted ' + e.detail : 'other ' + e); process.exitCode = e instanceof NotPermitted ? 0 : 1; }
      c.close();
    })();`;
  const child = spawn(process.execPath, ['-e', script], { uid: 65534, gid: 65534, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  const code = await new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), TIMEOUT);
    child.on('exit', (c) => { clearTimeout(timer); resolve(c); });
  });
  assert.equal(code, 0, out);
  assert.match(out, /op "identify" needs the control role/);
  assert.match(out, /uid 65534/);
});

test('DaemonUnavailable when nothing listens', async (t) => {
  const rig = await withRig(t);
  const missing = new Client({ path: path.join(rig.dir, 'none.sock'), timeout: 5000 });
  await assert.rejects(missing.hello(), (e) => e instanceof DaemonUnavailable && e.errno === 'ENOENT');
  const c = client(t, rig);
  const subscription = await c.subscribe({ follow: false });
  await rig.stopDaemon();
  await assert.rejects((async () => { while ((await subscription.get(TIMEOUT)) !== null); })(), DaemonUnavailable);
  const following = client(t, rig, { timeout: 5000 });
  const started = Date.now();
  await assert.rejects((async () => { const s = await following.subscribe({ giveUpAfter: 1000 }); await s.get(TIMEOUT); })(), DaemonUnavailable);
  assert.ok(Date.now() - started < 10000);
});

test('an unacknowledged event comes again after a daemon restart (durable, follow)', async (t) => {
  const rig = await withRig(t);
  await rig.waitIdentified();
  const c = client(t, rig);
  const subscription = await c.subscribe({ types: ['engagement'], durable: 'node-explicit', autoAck: false });
  const uids = [await rig.emitEngagement(), await rig.emitEngagement()];
  const e1 = await nextEvent(subscription, 'engagement', rig);
  assert.equal(await subscription.ack(e1), e1.seq);
  const e2 = await nextEvent(subscription, 'engagement', rig);
  assert.deepEqual([e1.engagementUid, e2.engagementUid], uids);
  assert.equal(await rig.stopDaemon(), 0);
  await assert.rejects(c.report('impression', e2), DaemonUnavailable);
  uids.push(await rig.emitEngagement());
  await rig.startDaemon();
  const again = await nextEvent(subscription, 'engagement', rig);
  assert.deepEqual([again.seq, again.engagementUid], [e2.seq, e2.engagementUid]);
  await c.report('impression', again);
  await subscription.ack(again);
  assert.equal((await nextEvent(subscription, 'engagement', rig)).engagementUid, uids[2]);
  await assertQuiet(subscription, 'engagement', 1000);
});

for (const durable of ['node-fresh', null]) {
  test(`across a fresh store (a damaged one moved aside) new events are handed out (durable: ${durable})`, async (t) => {
    const fs = require('node:fs');
    const rig = await withRig(t);
    await rig.waitIdentified();
    const c = client(t, rig);
    const subscription = await c.subscribe({ types: ['engagement'], durable });
    const before = [];
    for (let i = 0; i < 4; i++) before.push(await rig.emitEngagement());
    const got = [];
    for (let i = 0; i < 4; i++) got.push(await nextEvent(subscription, 'engagement', rig));
    assert.deepEqual(got.map((e) => e.engagementUid), before);
    // Reported: the server does not send them again after the restart.
    for (const e of got) await c.report('impression', e);
    assert.ok(await waitUntil(async () => (await rig.received([103])).length >= 4, TIMEOUT));
    assert.equal(await rig.stopDaemon(), 0);
    const db = path.join(rig.dir, 'state', 'smarticod.db');
    const fd = fs.openSync(db, 'r+');
    fs.writeSync(fd, Buffer.from('not a database, '.repeat(64)), 0, undefined, 0);
    fs.closeSync(fd);
    await rig.startDaemon();
    // The new journal grows past the old seqs before the client resumes (store_damaged and six:
    // seq 7): a resume from the old position inside the new journal would skip events.
    const after = [];
    for (let i = 0; i < 6; i++) after.push(await rig.emitEngagement());
    assert.ok(await waitUntil(async () => (await rig.status()).journal.last_seq >= 7, TIMEOUT), rig.log());
    const events = [];
    for (let i = 0; i < 6; i++) events.push(await nextEvent(subscription, 'engagement', rig));
    assert.deepEqual(events.map((e) => e.engagementUid), after);
    assert.ok(events[0].seq < got[3].seq, `seq ${events[0].seq} of the fresh journal`);
    await assertQuiet(subscription, 'engagement', 500);
    assert.ok(fs.readdirSync(path.join(rig.dir, 'state')).some((n) => n.startsWith('smarticod.db.corrupt-')));
  });
}
