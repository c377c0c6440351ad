'use strict';
// A client for smarticod's local socket API (docs/socket-api.md), Node.js ≥ 18, no dependencies.
// The same model as clients/python: one connection per Client, ops as promises, typed errors,
// one subscription per client that follows the daemon across restarts.

const net = require('node:net');

const DEFAULT_SOCKET = '/run/smarticod/smarticod.sock';
const JOURNALED_EVENTS = new Set(['engagement', 'minigame', 'deeplink', 'message']);
const EVENT_NAMES = new Set([...JOURNALED_EVENTS, 'session', 'identified', 'props', 'game_opening',
  'bridge', 'error', 'gap']);

class SmarticoError extends Error {
  constructor(message, { code = null, op = null, answer = null } = {}) {
    super(op ? `${op}: ${code ? code + ': ' : ''}${message}` : (code ? `${code}: ${message}` : message));
    this.name = new.target.name;
    this.code = code;
    this.op = op;
    this.answer = answer;
    this.detail = message;
  }
}

const ERRORS_BY_CODE = {};
function codeError(name, code) {
  const cls = { [name]: class extends SmarticoError {
    constructor(message, options = {}) { super(message, { code, ...options }); }
  } }[name];
  ERRORS_BY_CODE[code] = cls;
  return cls;
}
const BadJSON = codeError('BadJSON', 'bad_json');
const BadRequest = codeError('BadRequest', 'bad_request');
const UnknownOp = codeError('UnknownOp', 'unknown_op');
const LineTooLong = codeError('LineTooLong', 'line_too_long');
const NotPermitted = codeError('NotPermitted', 'not_permitted');
const NotReady = codeError('NotReady', 'not_ready');
const Timeout = codeError('Timeout', 'timeout');
const QueueFull = codeError('QueueFull', 'queue_full');
const StorageUnavailable = codeError('StorageUnavailable', 'storage_unavailable');
const HashCommandFailed = codeError('HashCommandFailed', 'hash_command_failed');
const TooManyConnections = codeError('TooManyConnections', 'too_many_connections');
const Internal = codeError('Internal', 'internal');
const OpNotImplemented = codeError('OpNotImplemented', 'not_implemented');

/** `server_error`: the server answered with errCode ≠ 0 (`errCode`, `errMsg`). */
class ServerError extends SmarticoError {
  constructor(message, options = {}) {
    super(message, { code: 'server_error', ...options });
    const error = (options.answer && options.answer.error) || {};
    this.errCode = error.errCode ?? null;
    this.errMsg = error.errMsg ?? null;
  }
}
ERRORS_BY_CODE.server_error = ServerError;

/** The socket cannot be reached, or the connection was lost. `errno`: 'ENOENT', 'ECONNREFUSED', … */
class DaemonUnavailable extends SmarticoError {
  constructor(message, path, errno = null) {
    super(message);
    this.path = path;
    this.errno = errno;
  }
}
class ClientTimeout extends SmarticoError {}
class ProtocolError extends SmarticoError {}

function errorFromAnswer(answer, op) {
  const error = answer && answer.error;
  if (!error || typeof error !== 'object') {
    return new ProtocolError(`an answer with ok false but no error object: ${JSON.stringify(answer).slice(0, 300)}`, { op });
  }
  const Cls = ERRORS_BY_CODE[error.code] || SmarticoError;
  return new Cls(String(error.message ?? ''), { code: String(error.code ?? ''), op, answer });
}

function describeConnectError(path, error) {
  switch (error.code) {
    case 'ENOENT': return `cannot connect to smarticod at ${path}: no such socket; is the daemon running and is socket.path (or $SMARTICOD_SOCKET) this path?`;
    case 'ECONNREFUSED': return `cannot connect to smarticod at ${path}: nobody listens (the daemon stopped or restarts)`;
    case 'EACCES': return `cannot connect to smarticod at ${path}: permission denied; the socket's mode and group (socket.mode, socket.group) must let this user in`;
    default: return `cannot connect to smarticod at ${path}: ${error.message}`;
  }
}

/** One event line: `name`, `seq`, `ts`, `data`. */
class Event {
  constructor(line) {
    this.name = String(line.event);
    this.seq = Number.isInteger(line.seq) ? line.seq : 0;
    this.ts = Number.isInteger(line.ts) ? line.ts : 0;
    this.data = line.data && typeof line.data === 'object' ? line.data : {};
  }

  get journaled() { return JOURNALED_EVENTS.has(this.name); }

  /** The engagement uid of an `engagement` (data.message) or a server `deeplink`, as text. */
  get engagementUid() {
    let uid = null;
    if (this.name === 'engagement') uid = this.data.message && this.data.message.engagement_uid;
    else if (this.name === 'deeplink') uid = this.data.engagement_uid;
    return uid === null || uid === undefined || uid === '' || typeof uid === 'boolean' ? null : String(uid);
  }

  /** An `engagement`'s activityType, or null (the daemon then assumes 30). */
  get activityType() {
    if (this.name !== 'engagement' || !this.data.message) return null;
    const v = this.data.message.activityType ?? this.data.message.activity_type;
    if (Number.isInteger(v)) return v;
    if (typeof v === 'string' && /^-?\d+$/.test(v)) return Number(v);
    return null;
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

class Client {
  /**
   * @param {{path?: string, timeout?: number}} options  timeout: ms to wait for an answer.
   * Call `await client.connect()` or just use an op (it connects).
   */
  constructor({ path = process.env.SMARTICOD_SOCKET || DEFAULT_SOCKET, timeout = 60000 } = {}) {
    this.path = path;
    this.timeout = timeout;
    this._socket = null;
    this._connecting = null;
    this._buffer = '';
    this._nextId = 1;
    this._pending = new Map(); // id → {resolve, reject, op} or {op, report: true} (acks without waiting)
    this._events = [];
    this._wake = null;
    this._deferredError = null;
    this._confirmedCursor = -1;
    this._maxSeqReceived = -1;
    this._subscription = null;
  }

  get connected() { return this._socket !== null; }

  /** Opens the connection if it is not open (and resumes an active subscription on it). */
  async connect() {
    if (this._socket) return;
    if (this._connecting) return this._connecting;
    this._connecting = this._open().finally(() => { this._connecting = null; });
    return this._connecting;
  }

  async _open() {
    const socket = await new Promise((resolve, reject) => {
      const s = net.createConnection(this.path);
      s.once('connect', () => { s.removeAllListeners('error'); resolve(s); });
      s.once('error', (error) => reject(new DaemonUnavailable(describeConnectError(this.path, error), this.path, error.code || null)));
    });
    socket.setEncoding('utf8');
    this._socket = socket;
    this._buffer = '';
    socket.on('data', (chunk) => this._onData(socket, chunk));
    const lost = (error) => this._lost(socket, error);
    socket.on('error', lost);
    socket.on('close', () => lost(null));
    const subscription = this._subscription;
    if (subscription && subscription._resumable()) {
      try {
        await subscription._subscribe();
      } catch (error) {
        if (!(error instanceof DaemonUnavailable)) this._drop();
        throw error;
      }
    }
  }

  _drop() {
    const socket = this._socket;
    this._socket = null;
    if (socket) socket.destroy();
    const closed = new DaemonUnavailable(`the connection to smarticod at ${this.path} was closed by this client`, this.path);
    for (const [, waiter] of this._pending) if (waiter.reject) waiter.reject(closed);
    this._pending.clear();
  }

  _requireSocket(op) {
    if (!this._socket) {
      throw new DaemonUnavailable(`the connection to smarticod at ${this.path} was lost before ${op} (the daemon stopped or restarts)`, this.path);
    }
  }

  _lost(socket, error) {
    if (socket !== this._socket) return;
    this._socket = null;
    socket.destroy();
    const lost = new DaemonUnavailable(`the connection to smarticod at ${this.path} was lost${error ? ': ' + error.message : ''} (the daemon stopped or restarts)`,
      this.path, error ? error.code || null : null);
    for (const [, waiter] of this._pending) if (waiter.reject) waiter.reject(lost);
    this._pending.clear();
    if (this._subscription && !this._subscription.follow) this._subscription._lostError = lost;
    this._notify();
  }

  _notify() {
    const wake = this._wake;
    this._wake = null;
    if (wake) wake();
  }

  _onData(socket, chunk) {
    if (socket !== this._socket) return;
    this._buffer += chunk;
    let newline;
    while ((newline = this._buffer.indexOf('\n')) >= 0) {
      const line = this._buffer.slice(0, newline);
      this._buffer = this._buffer.slice(newline + 1);
      if (line.trim() === '') continue;
      let value;
      try {
        value = JSON.parse(line);
      } catch (error) {
        this._deferredError = new ProtocolError(`the daemon sent a line that is not JSON (${error.message}): ${line.slice(0, 200)}`);
        this._notify();
        continue;
      }
      if (value && typeof value === 'object' && 'event' in value) {
        if (Number.isInteger(value.seq)) this._maxSeqReceived = Math.max(this._maxSeqReceived, value.seq);
        if (value.event === 'gap' && value.data && Number.isInteger(value.data.first_available_seq)) {
          this._maxSeqReceived = Math.max(this._maxSeqReceived, value.data.first_available_seq - 1);
        }
        this._events.push(value);
        this._notify();
        continue;
      }
      const waiter = this._pending.get(value && value.id);
      if (waiter) {
        this._pending.delete(value.id);
        if (waiter.resolve) {
          if (value.ok === true) waiter.resolve(value.result);
          else waiter.reject(errorFromAnswer(value, waiter.op));
        } else if (value.ok === true) {
          if (waiter.op === 'ack' && value.result && Number.isInteger(value.result.cursor)) {
            this._confirmedCursor = Math.max(this._confirmedCursor, value.result.cursor);
          }
        } else if (waiter.report && !this._deferredError) {
          this._deferredError = errorFromAnswer(value, waiter.op);
          this._notify();
        }
      } else if (value && value.id === null && value.ok === false) {
        // A refusal of the connection (too_many_connections) or of a line (line_too_long).
        const error = errorFromAnswer(value, null);
        for (const [, w] of this._pending) if (w.reject) w.reject(error);
        this._pending.clear();
      }
    }
  }

  _write(request) {
    this._requireSocket(request.op);
    this._socket.write(JSON.stringify(request) + '\n');
  }

  /** Sends `{op, ...args}` (undefined/null arguments left out); resolves with `result`. */
  async call(op, args = {}, { timeout } = {}) {
    if (!this._socket) await this.connect();
    const id = this._nextId++;
    const request = { id, op };
    for (const [k, v] of Object.entries(args)) if (v !== undefined && v !== null) request[k] = v;
    const wait = Math.max(this.timeout, timeout || 0);
    this._requireSocket(op);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this._pending.set(id, { op, report: false }); // its answer may still come: ignored
        reject(new ClientTimeout(`no answer to ${op} from the daemon at ${this.path} within ${wait} ms`, { op }));
      }, wait);
      const done = (f) => (v) => { clearTimeout(timer); f(v); };
      this._pending.set(id, { resolve: done(resolve), reject: done(reject), op });
      this._write(request);
    });
  }

  _sendWithoutWaiting(op, args) {
    this._requireSocket(op);
    const id = this._nextId++;
    this._pending.set(id, { op, report: true });
    this._write({ id, op, ...args });
  }

  close() {
    if (this._subscription) {
      this._subscription._closed = true;
      this._subscription = null;
    }
    this._drop();
    this._notify();
  }

  // -- ops (docs/socket-api.md, "Ops") --
  hello() { return this.call('hello'); }
  status() { return this.call('status'); }
  identify(extUserId, hash) { return this.call('identify', { ext_user_id: extUserId, hash }); }
  logout() { return this.call('logout'); }
  login() { return this.call('login'); }
  language(language) { return this.call('language', { language }); }
  pushToken(token, status, { platform, appPackageId } = {}) {
    return this.call('push_token', { token, status, platform, app_package_id: appPackageId });
  }
  event(eventType, payload) { return this.call('event', { event_type: eventType, payload }); }
  /** kind: 'impression' | 'action' | 'failed'; engagement: an Event or an engagement uid. */
  report(kind, engagement, { action, activityType } = {}) {
    let uid = engagement;
    if (engagement instanceof Event) {
      uid = engagement.engagementUid;
      if (uid === null) throw new TypeError(`a ${engagement.name} event (seq ${engagement.seq}) without an engagement_uid cannot be reported`);
      if (activityType === undefined) activityType = engagement.activityType;
    }
    return this.call('report', { kind, engagement_uid: uid, action, activity_type: activityType });
  }
  async ack(seq) {
    const result = await this.call('ack', { seq });
    const cursor = result && Number.isInteger(result.cursor) ? result.cursor : seq;
    this._confirmedCursor = Math.max(this._confirmedCursor, cursor);
    return cursor;
  }
  forget(durable) { return this.call('forget', { durable }); }
  minigameAck(sawTemplateId, pendingMessageId) {
    return this.call('minigame_ack', { saw_template_id: sawTemplateId, pending_message_id: pendingMessageId });
  }
  pushReport(kind, engagementUid, messageId, { action, userExtId } = {}) {
    return this.call('push_report', { kind, engagement_uid: engagementUid, message_id: messageId, action, user_ext_id: userExtId });
  }
  send(message) { return this.call('send', { message }); }
  async request(message, { expectCid, timeoutMs } = {}) {
    const result = await this.call('request', { message, expect_cid: expectCid, timeout_ms: timeoutMs },
      { timeout: (timeoutMs ?? 30000) + 5000 });
    return result && result.message;
  }
  bridge(message) { return this.call('bridge', { message }); }
  logLevel(level) { return this.call('log_level', { level }); }
  /** Smartico's data API by name (issue 28); a daemon without the op rejects with UnknownOp. */
  api(call, args = {}, { raw = false } = {}) { return this.call('api', { call, args, raw: raw || undefined }); }

  /**
   * Subscribes this connection. Options: types, durable, since, follow (default true),
   * autoAck (default true: an event is processed when the app asks for the next one),
   * maxRetryDelay (ms, default 2000), giveUpAfter (ms, default null: never).
   */
  async subscribe({ types = null, durable = null, since = null, follow = true, autoAck = true,
    maxRetryDelay = 2000, giveUpAfter = null } = {}) {
    if (this._subscription) throw new Error('this client already has a subscription; close it first or use another Client');
    if (types) {
      const unknown = types.filter((t) => !EVENT_NAMES.has(t));
      if (unknown.length) throw new TypeError(`unknown event types ${unknown.join(', ')}; known: ${[...EVENT_NAMES].sort().join(', ')}`);
    }
    const subscription = new Subscription(this, { types, durable, since, follow, autoAck, maxRetryDelay, giveUpAfter });
    this._subscription = subscription;
    this._events = [];
    this._maxSeqReceived = -1;
    this._confirmedCursor = -1;
    try {
      if (!this._socket) await this.connect();
      else await subscription._subscribe();
    } catch (error) {
      if (!(follow && error instanceof DaemonUnavailable && error.errno !== 'EACCES')) {
        this._subscription = null;
        throw error;
      }
    }
    return subscription;
  }
}

class Subscription {
  constructor(client, options) {
    this._client = client;
    Object.assign(this, {
      types: options.types, durable: options.durable, follow: options.follow, autoAck: options.autoAck,
      maxRetryDelay: options.maxRetryDelay, giveUpAfter: options.giveUpAfter,
    });
    this.reconnects = 0;
    this._since = options.since;
    // The daemon's journal the seqs below are positions in (the subscribe answer's `journal`).
    this._journal = null;
    // Where the subscription started in the daemon's journal (its first answer's last_seq, or
    // `since`): the least a durable name's cursor can be.
    this._startSeq = -1;
    this._subscribed = false;
    this._delivered = -1;
    this._processed = -1;
    this._acked = -1;
    this._current = null;
    this._closed = false;
    this._lostError = null;
    this._awaySince = null;
    this._delay = 100;
  }

  get lastSeq() { return Math.max(this._client._maxSeqReceived, this._since ?? -1); }

  _resumable() { return !this._closed && !this._lostError && (this.follow || !this._subscribed); }

  async _subscribe() {
    const client = this._client;
    const args = {};
    if (this.types) args.types = this.types;
    if (this.durable !== null) {
      args.durable = this.durable;
      if (!this._subscribed && this._since !== null) {
        args.since = this._since;
      } else if (this._subscribed) {
        // The daemon keeps the name's cursor and ignores this; it counts only when the name is
        // gone (a fresh store after a damaged one): beyond the new journal's end, the replay
        // starts at its beginning, so nothing journaled since is skipped.
        const floor = Math.max(this._acked, client._confirmedCursor, this._startSeq);
        if (floor >= 0) args.since = floor;
      }
    } else {
      const since = this._subscribed ? this.lastSeq : this._since;
      if (since !== null && since >= 0) args.since = since;
    }
    const resume = this._subscribed;
    if (resume && this._journal !== null && args.since !== undefined) {
      // Names the journal `since` counts in: if the daemon's store was replaced (a damaged one
      // moved aside), its seqs began again at 1 and it replays its journal from the start.
      args.journal = this._journal;
    }
    if (resume && this.durable !== null) {
      // The replay from the cursor brings back every journaled event after it, including the one
      // the app holds unfinished (not acknowledged).
      client._events = client._events.filter((e) => !JOURNALED_EVENTS.has(e.event));
      this._delivered = this._processed;
    }
    const result = await client.call('subscribe', args);
    const last = result && Number.isInteger(result.last_seq) ? result.last_seq : null;
    const journal = result && typeof result.journal === 'string' ? result.journal : null;
    const replaced = journal !== null && this._journal !== null
      ? journal !== this._journal
      // A daemon that does not name its journal: a last seq below what was seen.
      : last !== null && last < Math.max(this._delivered, client._maxSeqReceived);
    this._journal = journal;
    if (!resume && last !== null) this._startSeq = this._since !== null ? this._since : last;
    if (this.durable === null && this._since === null && last !== null) this._since = last;
    if (resume) this.reconnects += 1;
    this._subscribed = true;
    this._acked = client._confirmedCursor;
    if (resume && replaced) {
      // The daemon's journal is not the one this subscription saw: a fresh store (a damaged one
      // was moved aside) whose seqs begin again at 1. Nothing counted from the old journal
      // applies; without this, every new event would look replayed.
      this._delivered = this._processed = this._acked = this._startSeq = -1;
      client._maxSeqReceived = -1;
      client._confirmedCursor = -1;
      if (this.durable === null) this._since = 0;
    }
    this._awaySince = null;
    this._delay = 100;
  }

  _take() {
    const events = this._client._events;
    while (events.length) {
      const event = new Event(events.shift());
      if (event.journaled) {
        if (event.seq <= this._delivered) continue;
        this._delivered = event.seq;
      }
      return event;
    }
    return null;
  }

  /** The next event, or null when `timeout` ms pass without one (null: wait). */
  async get(timeout = null) {
    if (this._closed) throw new Error('this subscription is closed');
    if (this.autoAck && this._current) this._processed = Math.max(this._processed, this._current.seq);
    this._current = null;
    const client = this._client;
    const deadline = timeout === null ? null : Date.now() + timeout;
    for (;;) {
      if (client._deferredError) {
        const error = client._deferredError;
        client._deferredError = null;
        throw error;
      }
      const event = this._take();
      if (event) {
        this._current = event;
        return event;
      }
      if (this._lostError) throw this._lostError;
      try {
        if (!client._socket) await client.connect();
        if (this.durable !== null && this._processed > this._acked) {
          client._sendWithoutWaiting('ack', { seq: this._processed });
          this._acked = this._processed;
        }
        if (client._events.length || client._deferredError) continue;
        const remaining = deadline === null ? null : deadline - Date.now();
        if (remaining !== null && remaining <= 0) return null;
        await new Promise((resolve) => {
          const timer = remaining === null ? null : setTimeout(resolve, remaining);
          client._wake = () => { if (timer) clearTimeout(timer); resolve(); };
        });
        client._wake = null;
        if (deadline !== null && Date.now() >= deadline && !client._events.length && client._socket) return null;
      } catch (error) {
        if (!(error instanceof DaemonUnavailable) || !this.follow || error.errno === 'EACCES') throw error;
        const now = Date.now();
        if (this._awaySince === null) this._awaySince = now;
        if (this.giveUpAfter !== null && now - this._awaySince > this.giveUpAfter) throw error;
        let pause = this._delay;
        if (deadline !== null) {
          if (deadline <= now) return null;
          pause = Math.min(pause, deadline - now);
        }
        await sleep(pause);
        this._delay = Math.min(this._delay * 2, this.maxRetryDelay);
      }
    }
  }

  async next() {
    return { value: await this.get(null), done: false };
  }

  [Symbol.asyncIterator]() { return this; }

  /** Acknowledges `event` (an Event or a seq; default the last handed out) and all before it. */
  async ack(event = null) {
    if (this.durable === null) throw new Error('ack needs a durable subscription (subscribe({durable: NAME}))');
    const target = event ?? this._current;
    if (target === null) throw new Error('no event to acknowledge yet');
    const seq = target instanceof Event ? target.seq : Number(target);
    this._processed = Math.max(this._processed, seq);
    try {
      const cursor = await this._client.ack(seq);
      this._acked = Math.max(this._acked, cursor);
      return cursor;
    } catch (error) {
      if (error instanceof DaemonUnavailable && this.follow) return null; // sent after the reconnect
      throw error;
    }
  }

  /** Acknowledges what was processed (durable) and unsubscribes; the client stays open. */
  async close() {
    if (this._closed) return;
    const client = this._client;
    try {
      if (client._socket) {
        if (this.durable !== null && this.autoAck && this._current) this._processed = Math.max(this._processed, this._current.seq);
        if (this.durable !== null && this._processed > this._acked) await client.ack(this._processed);
        await client.call('unsubscribe');
      }
    } catch (error) {
      if (!(error instanceof SmarticoError)) throw error;
    } finally {
      this._closed = true;
      if (client._subscription === this) client._subscription = null;
      client._events = [];
    }
  }
}

module.exports = {
  Client, Subscription, Event, DEFAULT_SOCKET, EVENT_NAMES, JOURNALED_EVENTS, ERRORS_BY_CODE, errorFromAnswer,
  SmarticoError, BadJSON, BadRequest, UnknownOp, LineTooLong, NotPermitted, NotReady, ServerError, Timeout,
  QueueFull, StorageUnavailable, HashCommandFailed, TooManyConnections, Internal, OpNotImplemented, DaemonUnavailable, ClientTimeout, ProtocolError,
};
