// SPDX-License-Identifier: MIT
// isergw dashboard (docs/DASHBOARD.md). Read-only: it polls the agent's API with the operator's
// token (kept in sessionStorage, for this tab only) and follows /api/v1/events. The events
// stream is read with fetch() rather than EventSource, because EventSource cannot send the
// Authorization header and a token in a URL ends up in logs and history.
'use strict';

(function () {
	const API = '/api/v1';
	const PERIOD_MS = 2000;
	const TOKEN_KEY = 'isergw.token';
	const MAX_EVENTS = 200;

	const $ = (id) => document.getElementById(id);
	let token = sessionStorage.getItem(TOKEN_KEY) || '';
	let pollTimer = null;
	let polling = false;
	let pollAgain = false;
	let prevCounters = null; // { t: ms, v: Map("target\0lun" -> counters) }
	let rates = new Map();
	let stream = null; // AbortController of the running events stream
	let streamRetry = null;
	let streamDelay = 1000;
	let loginAttempt = 0; // a newer sign-in (or sign-out) cancels older retries
	let lastOk = 0; // Date.now() of the last complete refresh

	// ---- small helpers ---------------------------------------------------------------

	function el(tag, attrs, ...children) {
		const e = document.createElement(tag);
		for (const [k, v] of Object.entries(attrs || {})) {
			if (v === undefined || v === null) continue;
			if (k === 'class') e.className = v;
			else if (k.startsWith('data-')) e.setAttribute(k, v);
			else e[k] = v;
		}
		for (const c of children) {
			if (c === null || c === undefined) continue;
			e.append(c instanceof Node ? c : String(c));
		}
		return e;
	}

	// A state in words with a symbol, so it reads without colour.
	function state(ok, yes, no, warn) {
		if (ok === null || ok === undefined)
			return el('span', { class: 'st-warn' }, '? ' + (warn || 'unknown'));
		return ok
			? el('span', { class: 'st-ok' }, '\u2714 ' + yes)
			: el('span', { class: 'st-bad' }, '\u2716 ' + no);
	}

	function bytes(n) {
		if (typeof n === 'string') {
			// The configuration's sizes: bytes, or a number with K/M/G/T (powers of 1024).
			const m = /^([0-9]+(?:\.[0-9]+)?)\s*([KMGTP]?)i?B?$/i.exec(n.trim());
			if (!m) return n;
			return bytes(
				Number(m[1]) * 1024 ** ' KMGTP'.indexOf(m[2].toUpperCase() || ' '),
			);
		}
		if (typeof n !== 'number' || !isFinite(n)) return '–';
		const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
		let i = 0;
		while (n >= 1024 && i < u.length - 1) {
			n /= 1024;
			i++;
		}
		return (i ? n.toFixed(n < 10 ? 1 : 0) : n) + ' ' + u[i];
	}

	function num(v, digits) {
		if (v === undefined || v === null || !isFinite(v)) return '–';
		return v.toFixed(digits);
	}

	function duration(s) {
		if (typeof s !== 'number') return '';
		const d = Math.floor(s / 86400),
			h = Math.floor(s / 3600) % 24;
		const m = Math.floor(s / 60) % 60;
		return d ? `${d}d ${h}h` : h ? `${h}h ${m}m` : m ? `${m}m ${s % 60}s` : `${s}s`;
	}

	function clock(ms) {
		const d = ms ? new Date(ms) : new Date();
		return d.toLocaleTimeString([], { hour12: false });
	}

	class AuthError extends Error {}
	class HttpError extends Error {
		constructor(status, msg) {
			super(msg);
			this.status = status;
		}
	}

	async function errorMessage(resp) {
		try {
			const j = await resp.json();
			if (j && j.error && j.error.message) return j.error.message;
		} catch (e) {
			// not JSON: the status line says enough
		}
		return `HTTP ${resp.status}`;
	}

	// GET with the token; 401 throws AuthError with the API's message.
	async function get(path, text) {
		const resp = await fetch(path, {
			headers: token ? { Authorization: 'Bearer ' + token } : {},
			cache: 'no-store',
		});
		if (resp.status === 401) throw new AuthError(await errorMessage(resp));
		if (!resp.ok) throw new HttpError(resp.status, await errorMessage(resp));
		return text ? resp.text() : resp.json();
	}

	// ---- login -----------------------------------------------------------------------

	function showLogin(message) {
		loginAttempt++;
		stopAll();
		token = '';
		sessionStorage.removeItem(TOKEN_KEY);
		$('dash').hidden = true;
		$('logout').hidden = true;
		$('login').hidden = false;
		const err = $('login-error');
		err.hidden = !message;
		err.textContent = message ? 'Not signed in: ' + message : '';
		$('summary').textContent = 'Sign in to watch the gateway';
		$('token').focus();
	}

	async function login(candidate) {
		const attempt = ++loginAttempt;
		token = candidate.trim();
		const err = $('login-error');
		try {
			const v = await get(API + '/version');
			sessionStorage.setItem(TOKEN_KEY, token);
			$('login').hidden = true;
			err.hidden = true;
			$('dash').hidden = false;
			$('logout').hidden = false;
			$('agent-line').textContent =
				`agent ${v.version}, API ${v.api}, ` +
				`signed in with a ${v.role} token`;
			startAll();
		} catch (e) {
			if (e instanceof AuthError) {
				showLogin(e.message);
			} else {
				// The agent is away (restarting?): keep trying this token until it answers
				// or someone signs in with another.
				token = '';
				$('login').hidden = false;
				err.hidden = false;
				err.textContent =
					`The agent could not be reached (${e.message}); ` +
					'trying again…';
				setTimeout(() => {
					if (attempt === loginAttempt) login(candidate);
				}, PERIOD_MS);
			}
		}
	}

	function startAll() {
		prevCounters = null;
		rates = new Map();
		schedulePoll(0);
		startEvents();
	}

	function stopAll() {
		clearTimeout(pollTimer);
		pollTimer = null;
		clearTimeout(streamRetry);
		streamRetry = null;
		if (stream) stream.abort();
		stream = null;
		$('events-state').textContent = '';
	}

	// ---- polling ---------------------------------------------------------------------

	function schedulePoll(ms) {
		clearTimeout(pollTimer);
		pollTimer = setTimeout(poll, ms);
	}

	// Something changed (an event): refresh now, or right after the poll under way.
	function refreshSoon() {
		if (!token) return;
		if (polling) pollAgain = true;
		else schedulePoll(0);
	}

	function banner(msg) {
		const b = $('banner');
		b.hidden = !msg;
		b.textContent = msg || '';
	}

	// A target deleted between the list and its details is simply gone.
	async function targetDetails(list) {
		const one = async (t) => {
			try {
				return await get(API + '/targets/' + encodeURIComponent(t.name));
			} catch (e) {
				if (e instanceof HttpError && e.status === 404) return null;
				throw e;
			}
		};
		return (await Promise.all(list.map(one))).filter((t) => t);
	}

	async function poll() {
		if (!token) return;
		polling = true;
		try {
			const health = await get(API + '/health');
			const [targets, portals, metrics] = await Promise.all([
				get(API + '/targets'),
				get(API + '/portals'),
				get('/metrics', true),
			]);
			const details = await targetDetails(targets.targets);
			await lunStatus(details);
			let sessions = null,
				sessErr = null;
			try {
				sessions = (await get(API + '/sessions')).sessions;
			} catch (e) {
				if (e instanceof AuthError) throw e;
				sessErr = e.message;
			}
			updateRates(parseMetrics(metrics));
			banner('');
			renderHealth(health, sessions);
			renderTargets(details, sessions);
			renderSessions(sessions, sessErr);
			renderPortals(portals.portals || []);
			$('summary').textContent = summaryLine(health, details, sessions);
			// A tab or a wall screen's title bar says it too.
			document.title =
				(health.status === 'ok' ? '\u2714' : '\u26a0') +
				' isergw dashboard';
			lastOk = Date.now();
		} catch (e) {
			polling = false;
			if (e instanceof AuthError) {
				showLogin(e.message);
				return;
			}
			const why =
				e instanceof HttpError ? 'answered an error' : 'is not answering';
			const figures = lastOk
				? `The figures below are from ${clock(lastOk)}.`
				: 'No figures yet.';
			banner(
				`The agent ${why} (${e.message}); retrying every ${PERIOD_MS / 1000} s. ${figures}`,
			);
			if (!(e instanceof HttpError)) {
				document.title = '\u2716 isergw dashboard';
				$('summary').textContent = '\u2716 agent unreachable';
				$('health-agent').replaceChildren(state(false, '', 'unreachable'));
			}
		}
		polling = false;
		if (!token) return;
		schedulePoll(pollAgain ? 0 : PERIOD_MS);
		pollAgain = false;
	}

	// A LUN's `status` comes with its own GET; the target's GET does not include it. Remote
	// LUNs (any backstore but the local kinds) are read every poll (their paths change);
	// a local LUN's status is read once per backstore for its I/O engine, which only changes
	// when the backstore does.
	const LOCAL = ['file', 'block', 'ram', 'null'];
	const engines = new Map(); // target\0lun\0backstore -> io_engine ('' when it has none)
	const engineKey = (t, l) => `${t.name}\0${l.lun}\0${JSON.stringify(l.backstore)}`;
	async function lunStatus(targets) {
		const want = [];
		for (const t of targets)
			for (const l of t.luns || []) {
				if (l.status || !l.backstore) continue;
				if (!LOCAL.includes(l.backstore.type)) want.push([t, l]);
				else if (engines.has(engineKey(t, l)))
					l.ioEngine = engines.get(engineKey(t, l));
				else want.push([t, l]);
			}
		const one = async ([t, l]) => {
			try {
				const full = await get(
					`${API}/targets/${encodeURIComponent(t.name)}/luns/${l.lun}`,
				);
				if (!full || !full.status) return;
				if (LOCAL.includes(l.backstore.type)) {
					l.ioEngine = full.status.io_engine || '';
					engines.set(engineKey(t, l), l.ioEngine);
				} else {
					l.status = full.status;
				}
			} catch (e) {
				if (e instanceof AuthError) throw e;
			}
		};
		await Promise.all(want.map(one));
	}

	// Prometheus text: name{labels} value. Only the per-LUN counters are kept.
	function parseMetrics(text) {
		const out = new Map();
		const re =
			/^isergw_lun_(read_ops|write_ops|read_bytes|write_bytes|errors)_total\{(.*)\}\s+([0-9.eE+-]+)\s*$/;
		for (const line of text.split('\n')) {
			const m = re.exec(line);
			if (!m) continue;
			const labels = {};
			const lre = /(\w+)="((?:[^"\\]|\\.)*)"/g;
			let l;
			while ((l = lre.exec(m[2])) !== null)
				labels[l[1]] = l[2].replace(/\\n/g, '\n').replace(/\\(.)/g, '$1');
			const key = labels.target + '\0' + labels.lun;
			if (!out.has(key)) out.set(key, {});
			out.get(key)[m[1]] = Number(m[3]);
		}
		return out;
	}

	function updateRates(cur) {
		const now = performance.now();
		if (prevCounters) {
			const dt = (now - prevCounters.t) / 1000;
			rates = new Map();
			for (const [k, c] of cur) {
				const p = prevCounters.v.get(k);
				if (!p || dt <= 0) continue;
				const r = {};
				for (const f of [
					'read_ops',
					'write_ops',
					'read_bytes',
					'write_bytes',
				]) {
					const d = c[f] - p[f];
					// A counter that went back: the gateway restarted; no rate yet.
					r[f] = d >= 0 ? d / dt : null;
				}
				r.errors = c.errors;
				rates.set(k, r);
			}
		}
		prevCounters = { t: now, v: cur };
	}

	// ---- rendering -------------------------------------------------------------------

	function summaryLine(h, targets, sessions) {
		const g = h.gateway || {};
		const nl = targets.reduce((n, t) => n + (t.luns || []).length, 0);
		const parts = [];
		parts.push(h.status === 'ok' ? '\u2714 ok' : '\u26a0 ' + h.status);
		parts.push(g.connected ? 'gateway connected' : 'gateway NOT connected');
		parts.push(
			`${targets.length} target${targets.length === 1 ? '' : 's'}, ${nl} LUN${nl === 1 ? '' : 's'}`,
		);
		if (sessions)
			parts.push(`${sessions.length} session${sessions.length === 1 ? '' : 's'}`);
		parts.push('updated ' + clock());
		return parts.join(' \u00b7 ');
	}

	function renderHealth(h, sessions) {
		const g = h.gateway || {};
		$('health-agent').replaceChildren(
			state(true, `up ${duration(h.uptime_s)}`, ''),
			el('span', { class: 'muted' }, ` v${h.version}, ${h.store} store`),
		);
		$('health-gateway').replaceChildren(
			h.gateway === undefined
				? state(null, '', '', 'no gateway configured')
				: state(!!g.connected, 'connected', 'not connected'),
			g.socket ? el('span', { class: 'muted' }, ' ' + g.socket) : null,
		);
		const inSync = g.connected ? !!g.in_sync : null;
		$('health-config').replaceChildren(
			state(inSync, 'in sync', 'not applied', 'gateway away'),
			` generation ${h.generation}, applied ${g.applied_generation || '–'}`,
		);
		$('health-sessions').textContent = sessions
			? String(sessions.length)
			: 'unknown (gateway away)';
		const e = $('health-error');
		e.hidden = !g.error;
		e.textContent = g.error ? 'Last apply error: ' + g.error : '';
	}

	function backstoreText(b) {
		if (!b) return '–';
		const where = b.path || b.device || b.url || b.name || '';
		return b.type + (where ? ': ' + where : '');
	}

	// A LUN's `status` (remote LUN paths), shown as the agent reports it; a local LUN has no
	// paths and shows how its I/O is done (io_engine: uring or threads; ram and null: none).
	function statusCell(st, l) {
		if (l && l.ioEngine)
			return el(
				'td',
				{ class: 'path', 'data-io-engine': l.ioEngine },
				el('span', { class: 'muted' }, 'local, io_engine '),
				l.ioEngine,
			);
		if (!st) return el('td', {}, el('span', { class: 'muted' }, '–'));
		const td = el('td', { class: 'path' });
		const line = (o) => {
			const bits = [];
			const good = /^(ok|up|active|optimized|connected|ready|online)/i;
			if (o.state !== undefined)
				bits.push(
					good.test(o.state)
						? state(true, o.state, '')
						: state(false, '', o.state),
				);
			for (const k of ['url', 'name', 'group', 'priority'])
				if (o[k] !== undefined) bits.push(` ${k} ${o[k]}`);
			const err = o.last_error || o.error;
			if (err) bits.push(el('span', { class: 'error' }, ' last error: ' + err));
			return el('div', {}, ...bits);
		};
		td.append(line(st));
		for (const p of st.paths || []) td.append(line(p));
		return td;
	}

	const LUN_COLUMNS = [
		'LUN',
		'Size',
		'Backstore',
		'Read IOPS',
		'Write IOPS',
		'Read MB/s',
		'Write MB/s',
		'Errors (total)',
		'Paths / status',
	];

	function lunHead() {
		const th = (c, i) =>
			el('th', { scope: 'col', class: i >= 3 && i <= 7 ? 'num' : null }, c);
		return el('thead', {}, el('tr', {}, ...LUN_COLUMNS.map(th)));
	}

	function lunRow(t, l) {
		const key = t.name + '\0' + l.lun;
		const r = rates.get(key) || {};
		const c = prevCounters && prevCounters.v.get(key);
		const b = l.backstore || {};
		const cell = (metric, v) => el('td', { class: 'num', 'data-metric': metric }, v);
		return el(
			'tr',
			{ 'data-lun': `${t.name}/${l.lun}` },
			el('th', { scope: 'row' }, String(l.lun)),
			el('td', {}, bytes(b.size)),
			el('td', { class: 'path' }, backstoreText(b)),
			cell('read_iops', num(r.read_ops, 0)),
			cell('write_iops', num(r.write_ops, 0)),
			cell('read_mbps', num(r.read_bytes / 1e6, 1)),
			cell('write_mbps', num(r.write_bytes / 1e6, 1)),
			cell('errors', c ? String(c.errors) : '–'),
			statusCell(l.status, l),
		);
	}

	function plural(n, what) {
		return `${n} ${what}${n === 1 ? '' : 's'}`;
	}

	function targetBlock(t, sessions) {
		const alias = t.alias ? el('span', { class: 'muted' }, ` (${t.alias})`) : null;
		const who = t.allow_any_initiator
			? 'any initiator'
			: `${(t.initiators || []).length} initiator(s) admitted`;
		const parts = [`portals: ${(t.portals || []).join(', ') || 'all'}`, who];
		if (sessions)
			parts.push(
				plural(
					sessions.filter((s) => s.target === t.name).length,
					'session',
				),
			);
		const luns = t.luns || [];
		const rows = luns.map((l) => lunRow(t, l));
		if (!luns.length) rows.push(emptyRow(9, 'no LUNs'));
		const table = el(
			'table',
			{ class: 'luns', 'data-target': t.name },
			el('caption', { class: 'sr-only' }, 'LUNs of ' + t.name),
			lunHead(),
			el('tbody', {}, ...rows),
		);
		return el(
			'div',
			{ class: 'target', 'data-target': t.name },
			el('h3', {}, t.name, alias),
			el('p', { class: 'muted' }, parts.join(' \u00b7 ')),
			table,
		);
	}

	function renderTargets(targets, sessions) {
		const kids = targets.map((t) => targetBlock(t, sessions));
		if (!targets.length)
			kids.push(el('p', { class: 'muted' }, 'No targets are configured.'));
		$('targets').replaceChildren(...kids);
	}

	// A row with one cell saying the table is empty.
	function emptyRow(cols, text) {
		return el('tr', {}, el('td', { colSpan: cols, class: 'muted' }, text));
	}

	function sessionRow(s) {
		const c0 = (s.connections || [])[0] || {};
		const target = s.target || (s.type === 'discovery' ? '(discovery)' : '–');
		return el(
			'tr',
			{ 'data-tsih': String(s.tsih) },
			el('td', { class: 'path' }, s.initiator || '–'),
			el('td', {}, s.transport || c0.transport || '–'),
			el('td', {}, s.peer || c0.peer || '–'),
			el('td', { class: 'path' }, target),
			el('td', { class: 'num' }, String(s.tsih)),
			el('td', { class: 'num' }, String((s.connections || []).length)),
		);
	}

	function renderSessions(sessions, err) {
		const note = $('sessions-note');
		note.hidden = !err;
		note.textContent = err ? 'Sessions unknown: ' + err : '';
		const rows = (sessions || []).map(sessionRow);
		if (sessions && !rows.length) rows.push(emptyRow(6, 'no sessions'));
		$('sessions').tBodies[0].replaceChildren(...rows);
	}

	// A portal's live status (GET /portals): listening or not, and why.
	function portalState(st) {
		if (!st) return el('span', { class: 'muted' }, 'not reported by this agent');
		const listening = st.listening === undefined ? null : st.listening;
		const why = st.reason || st.error;
		let more = null;
		if (why) more = el('span', { class: 'muted' }, ': ' + why);
		else if (st.bound) more = el('span', { class: 'muted' }, ' on ' + st.bound);
		return el(
			'span',
			{},
			state(listening, 'listening', 'not listening', 'unknown'),
			more,
		);
	}

	function renderPortals(portals) {
		const rows = portals.map((p) =>
			el(
				'tr',
				{ 'data-portal': p.name },
				el('td', {}, p.name),
				el('td', {}, p.transport || 'tcp'),
				el(
					'td',
					{},
					`${p.address}:${p.port === undefined ? 3260 : p.port}`,
				),
				el('td', {}, portalState(p.status)),
			),
		);
		if (!rows.length) rows.push(emptyRow(4, 'no portals'));
		$('portals').tBodies[0].replaceChildren(...rows);
	}

	// ---- events ----------------------------------------------------------------------

	function describe(type, d) {
		switch (type) {
			case 'hello':
				return (
					`stream connected; configuration generation ${d.generation}, gateway ` +
					(d.gateway ? 'connected' : 'not connected')
				);
			case 'config':
				return `configuration generation ${d.generation} (gateway: ${d.gateway})`;
			case 'gateway':
				return d.connected ? 'gateway connected' : 'gateway disconnected';
			case 'apply':
				if (d.ok) return `gateway applied generation ${d.generation}`;
				return (
					`gateway could not apply generation ${d.generation}: ` +
					(d.errors ? JSON.stringify(d.errors) : d.message || 'error')
				);
			case 'session': {
				const s = d.session || {};
				return (
					`${d.action} ${s.initiator || '?'} \u2192 ${s.target || '(discovery)'}` +
					` over ${s.transport || '?'}${s.peer ? ' from ' + s.peer : ''}`
				);
			}
			default:
				return JSON.stringify(d);
		}
	}

	function addEvent(type, data, id) {
		const list = $('events');
		const li = el(
			'li',
			{ 'data-type': type, 'data-id': id },
			// The agent's time_ms is its monotonic clock: show when the page got it.
			el('time', {}, clock()),
			el('span', { class: 'type' }, type),
			describe(type, data || {}),
		);
		list.prepend(li);
		while (list.children.length > MAX_EVENTS) list.lastChild.remove();
	}

	function eventsState(text) {
		$('events-state').textContent = text ? `(${text})` : '';
	}

	function dispatchBlock(block) {
		let type = 'message',
			data = '',
			id;
		for (const line of block.split('\n')) {
			if (!line || line.startsWith(':')) continue;
			const i = line.indexOf(':');
			const field = i < 0 ? line : line.slice(0, i);
			let value = i < 0 ? '' : line.slice(i + 1);
			if (value.startsWith(' ')) value = value.slice(1);
			if (field === 'event') type = value;
			else if (field === 'data') data += (data ? '\n' : '') + value;
			else if (field === 'id') id = value;
		}
		if (!data) return;
		let parsed;
		try {
			parsed = JSON.parse(data);
		} catch (e) {
			parsed = { text: data };
		}
		addEvent(type, parsed, id);
		if (type !== 'hello') refreshSoon();
	}

	function retryEvents(why) {
		stream = null;
		if (!token) return;
		eventsState(`${why}; reconnecting in ${Math.round(streamDelay / 1000)} s`);
		streamRetry = setTimeout(startEvents, streamDelay);
		streamDelay = Math.min(streamDelay * 2, 10000);
	}

	async function startEvents() {
		clearTimeout(streamRetry);
		if (!token) return;
		const ctl = new AbortController();
		stream = ctl;
		eventsState('connecting');
		let resp;
		try {
			resp = await fetch(API + '/events', {
				headers: {
					Authorization: 'Bearer ' + token,
					Accept: 'text/event-stream',
				},
				cache: 'no-store',
				signal: ctl.signal,
			});
		} catch (e) {
			if (stream === ctl) retryEvents('agent unreachable');
			return;
		}
		if (resp.status === 401) {
			showLogin(await errorMessage(resp));
			return;
		}
		if (!resp.ok || !resp.body) {
			retryEvents(`HTTP ${resp.status}`);
			return;
		}
		eventsState('live');
		streamDelay = 1000;
		const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
		let buf = '';
		try {
			for (;;) {
				const { value, done } = await reader.read();
				if (done) break;
				buf += value.replace(/\r\n?/g, '\n');
				let i;
				while ((i = buf.indexOf('\n\n')) >= 0) {
					dispatchBlock(buf.slice(0, i));
					buf = buf.slice(i + 2);
				}
			}
		} catch (e) {
			// aborted (sign out) or the connection dropped: handled below
		}
		if (stream === ctl) {
			// The agent went away (restart): the next poll shows it; a stream ending
			// means the state may have changed, so refresh too.
			refreshSoon();
			retryEvents('stream ended');
		}
	}

	// ---- wiring ----------------------------------------------------------------------

	document.addEventListener('DOMContentLoaded', () => {
		$('period').textContent = String(PERIOD_MS / 1000);
		$('login-form').addEventListener('submit', (ev) => {
			ev.preventDefault();
			login($('token').value);
			$('token').value = '';
		});
		$('logout').addEventListener('click', () => showLogin(''));
		$('events-clear').addEventListener('click', () => $('events').replaceChildren());
		if (token) login(token);
		else showLogin('');
	});
})();
