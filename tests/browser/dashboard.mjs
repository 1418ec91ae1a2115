// SPDX-License-Identifier: MIT
// The dashboard as an operator sees it, in headless Chromium. Started by tests/browser/run.sh,
// which owns the daemons: "CMD name" asks it to act (I/O, add a LUN, stop or start a daemon) and
// DASH_DIR/cmd.name.done carries its answer. Prints "PASS|FAIL|SKIP name: why" lines and "END".
// Every check waits for its condition (bounded); none measures time.
import { createRequire } from 'node:module';
import { existsSync, readFileSync } from 'node:fs';

const require = createRequire(process.env.PW_DIR + '/');
const { chromium } = require('playwright-core');

const URL = process.env.DASH_URL;
const READ = process.env.DASH_READ;
const IQN = process.env.DASH_IQN;
const DIR = process.env.DASH_DIR;
const WAIT = 45000; // generous: a loaded 2-core machine, and sanitized daemons

let page;
let shot = 0;
const consoleErrors = [];
const pageErrors = [];

function say(line) {
	process.stdout.write(line + '\n');
}

async function failed(name, why) {
	say(`FAIL ${name}: ${String(why).split('\n')[0]}`);
	if (page) {
		const file = `${DIR}/fail-${++shot}-${name.replace(/[^A-Za-z0-9_.-]+/g, '_')}.png`;
		try {
			await page.screenshot({ path: file, fullPage: true });
			say(`  screenshot ${file}`);
		} catch (e) {
			say(`  no screenshot: ${e.message}`);
		}
	}
}

// step NAME FN: FN throws (or a wait times out) to fail; returns whether it passed.
async function step(name, fn) {
	try {
		await fn();
		say(`PASS ${name}`);
		return true;
	} catch (e) {
		await failed(name, e.message || e);
		return false;
	}
}

function sleep(ms) {
	return new Promise((r) => setTimeout(r, ms));
}

async function cmd(name) {
	const done = `${DIR}/cmd.${name}.done`;
	say(`CMD ${name}`);
	for (let i = 0; i < 600; i++) {
		if (existsSync(done)) {
			const rc = readFileSync(done, 'utf8').trim();
			if (rc !== '0')
				throw new Error(`the runner could not ${name} (status ${rc})`);
			return;
		}
		await sleep(100);
	}
	throw new Error(`the runner did not answer ${name}`);
}

function lunRow(lun) {
	return page.locator(`tr[data-lun="${IQN}/${lun}"]`);
}

async function number(locator) {
	const t = (await locator.textContent()) || '';
	return Number(t.trim());
}

const browser = await chromium.launch({
	executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
	// Root in a container: Chromium's sandbox needs user namespaces it may not have.
	args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
});
try {
	const ctx = await browser.newContext({ viewport: { width: 1600, height: 1000 } });
	page = await ctx.newPage();
	page.on('console', (m) => {
		if (m.type() === 'error')
			consoleErrors.push({ text: m.text(), url: m.location().url || '' });
	});
	page.on('pageerror', (e) => pageErrors.push(e.message));
	// Everything the page loads must come from the agent: nothing fetched from elsewhere.
	const foreign = [];
	page.on('request', (r) => {
		if (!r.url().startsWith(URL + '/') && !r.url().startsWith('data:')) foreign.push(r.url());
	});

	await step('the page loads without a token and asks for one', async () => {
		const resp = await page.goto(URL + '/');
		if (!resp || resp.status() !== 200)
			throw new Error(`GET / answered ${resp && resp.status()}`);
		await page.getByLabel('API token').waitFor({ state: 'visible', timeout: WAIT });
		await page.getByRole('button', { name: 'Sign in' }).waitFor({ timeout: WAIT });
		if (await page.locator('#dash').isVisible())
			throw new Error('the dashboard shows before signing in');
	});

	await step('a wrong token shows the API error in the login box', async () => {
		// What the API itself says to a bad token: the page must show that message.
		const r = await fetch(URL + '/api/v1/version', {
			headers: { Authorization: 'Bearer igw_' + '0'.repeat(64) },
		});
		const msg = (await r.json()).error.message;
		await page.getByLabel('API token').fill('igw_' + '0'.repeat(64));
		await page.getByRole('button', { name: 'Sign in' }).click();
		const err = page.locator('#login-error');
		await err.waitFor({ state: 'visible', timeout: WAIT });
		const text = await err.textContent();
		if (!text.includes(msg))
			throw new Error(`login error "${text}" lacks the API's message "${msg}"`);
		if (await page.locator('#dash').isVisible())
			throw new Error('the dashboard shows with a wrong token');
		// Chromium logs every 4xx response as a console error; the refused token's 401 is
		// this check's point, so that one line (and only it) is not held against the page.
		const i = consoleErrors.findIndex(
			(c) => / 401 /.test(c.text) && c.url.endsWith('/api/v1/version'),
		);
		if (i >= 0) consoleErrors.splice(i, 1);
	});

	const signedIn = await step('a read-only token shows the target and its LUN', async () => {
		await page.getByLabel('API token').fill(READ);
		await page.getByRole('button', { name: 'Sign in' }).click();
		await page
			.locator(`div.target[data-target="${IQN}"] h3`)
			.waitFor({ timeout: WAIT });
		const row = lunRow(0);
		await row.waitFor({ timeout: WAIT });
		const text = await row.textContent();
		if (
			!text.includes('1.0 GiB') ||
			!text.includes('file: ') ||
			!text.includes('lun0.img')
		)
			throw new Error(`LUN 0 row reads "${text}"`);
		const who = await page.locator('#agent-line').textContent();
		if (!who.includes('read token')) throw new Error(`agent line "${who}"`);
		if (await page.locator('#login').isVisible())
			throw new Error('the login box is still shown');
	});
	if (!signedIn) throw new Error('not signed in: the other checks need the dashboard');

	await step("a local LUN shows its I/O engine, as the LUN's status reports it", async () => {
		const resp = await fetch(`${URL}/api/v1/targets/${encodeURIComponent(IQN)}/luns/0`, {
			headers: { Authorization: `Bearer ${READ}` },
		});
		const lun = await resp.json();
		const engine = lun.status && lun.status.io_engine;
		if (engine !== 'uring' && engine !== 'threads')
			throw new Error(`the API reports io_engine ${engine} for LUN 0`);
		const cell = lunRow(0).locator(`[data-io-engine="${engine}"]`);
		await cell.waitFor({ timeout: WAIT });
		const text = await cell.textContent();
		if (!text.includes(`io_engine ${engine}`))
			throw new Error(`LUN 0's status cell reads "${text}"`);
	});

	await step('health: gateway connected, configuration in sync', async () => {
		await page
			.locator('#health-gateway', { hasText: 'connected' })
			.and(page.locator('#health-gateway:not(:has-text("not connected"))'))
			.waitFor({ timeout: WAIT });
		await page
			.locator('#health-config', { hasText: 'in sync' })
			.waitFor({ timeout: WAIT });
	});

	await step('portals: the configured portal is listed as listening', async () => {
		const row = page.locator('#portals tr[data-portal="tcp0"]');
		await row.filter({ hasText: 'listening' }).waitFor({ timeout: WAIT });
		const text = await row.textContent();
		if (
			text.includes('not listening') ||
			!text.includes(`127.0.0.1:${process.env.DASH_GW_PORT}`)
		)
			throw new Error(`portal row reads "${text}"`);
	});

	await cmd('io-start');
	await step(
		"I/O from isergw-bench makes the LUN's read and write IOPS and MB/s non-zero",
		async () => {
			const cells = ['read_iops', 'read_mbps', 'write_iops', 'write_mbps'].map(
				(m) => lunRow(0).locator(`[data-metric="${m}"]`),
			);
			const end = Date.now() + 2 * WAIT;
			let last = '';
			while (Date.now() < end) {
				const v = [];
				for (const c of cells) v.push(await number(c));
				if (v.every((x) => x > 0)) return;
				last = `read ${v[0]} IOPS ${v[1]} MB/s, write ${v[2]} IOPS ${v[3]} MB/s`;
				await sleep(250);
			}
			throw new Error(`still ${last}`);
		},
	);

	await step('the bench session appears while it is logged in', async () => {
		const row = page.locator('#sessions tbody tr', {
			hasText: 'iqn.2026-11.org.isergw:bench',
		});
		await row.waitFor({ timeout: WAIT });
		const text = await row.textContent();
		if (!text.includes(IQN) || !text.includes('tcp') || !text.includes('127.0.0.1'))
			throw new Error(`session row reads "${text}"`);
		await page
			.locator('#events li[data-type="session"]', {
				hasText: 'login iqn.2026-11.org.isergw:bench ',
			})
			.waitFor({ timeout: WAIT });
	});

	await cmd('io-stop');
	await step('the sessions go away after logout', async () => {
		await page
			.locator('#sessions tbody tr[data-tsih]')
			.first()
			.waitFor({ state: 'detached', timeout: WAIT });
		await page
			.locator('#events li[data-type="session"]', {
				hasText: 'logout iqn.2026-11.org.isergw:bench ',
			})
			.waitFor({ timeout: WAIT });
	});

	await page.evaluate(() => {
		window.__sameDocument = true;
	});
	await cmd('add-lun');
	await step(
		'a LUN added through the API shows as a live event and a row, no reload',
		async () => {
			await page
				.locator('#events li[data-type="config"]', {
					hasText: 'generation',
				})
				.waitFor({ timeout: WAIT });
			const row = lunRow(1);
			await row.waitFor({ timeout: WAIT });
			const text = await row.textContent();
			if (!text.includes('ram') || !text.includes('64 MiB'))
				throw new Error(`LUN 1 row reads "${text}"`);
			if (!(await page.evaluate(() => window.__sameDocument === true)))
				throw new Error('the page was reloaded');
		},
	);

	await step('no console errors, uncaught exceptions or requests to elsewhere', async () => {
		const all = consoleErrors.map((c) => `${c.text} (${c.url})`).concat(pageErrors);
		if (foreign.length) all.push('requests to elsewhere: ' + foreign.join(' '));
		if (all.length) throw new Error(all.join(' | '));
	});

	await step('the page is readable without colour: states are words', async () => {
		const g = await page.locator('#health-gateway').textContent();
		if (!/\bconnected\b/.test(g)) throw new Error(`gateway state reads "${g}"`);
		// Every button and input has an accessible name.
		const unnamed = await page.evaluate(
			() =>
				[...document.querySelectorAll('button, input')].filter((e) => {
					if (e.closest('[hidden]')) return false;
					const label =
						e.labels && e.labels.length
							? e.labels[0].textContent
							: '';
					return !(
						e.textContent.trim() ||
						label.trim() ||
						e.getAttribute('aria-label')
					);
				}).length,
		);
		if (unnamed) throw new Error(`${unnamed} control(s) without a name`);
	});

	// Chromium logs the 503s of /sessions while the gateway is away as console errors: the
	// console check above is done before this.
	await cmd('gateway-stop');
	await step(
		'a stopped gateway reads "not connected", with an event, sessions unknown',
		async () => {
			await page
				.locator('#health-gateway', { hasText: 'not connected' })
				.waitFor({ timeout: WAIT });
			await page
				.locator('#events li[data-type="gateway"]', {
					hasText: 'disconnected',
				})
				.waitFor({ timeout: WAIT });
			await page
				.locator('#sessions-note', { hasText: 'Sessions unknown' })
				.waitFor({ timeout: WAIT });
			await page
				.locator('#portals tr[data-portal="tcp0"]', {
					hasText: 'the gateway is not connected',
				})
				.waitFor({ timeout: WAIT });
			const top = await page.locator('#summary').textContent();
			if (!top.includes('gateway NOT connected'))
				throw new Error(`top line reads "${top}"`);
		},
	);
	await cmd('gateway-start');
	await step(
		'the gateway back: connected, in sync again, the added LUN re-applied',
		async () => {
			await page
				.locator('#events li[data-type="gateway"]', {
					hasText: 'gateway connected',
				})
				.waitFor({ timeout: 2 * WAIT });
			await page
				.locator('#health-config', { hasText: 'in sync' })
				.waitFor({ timeout: 2 * WAIT });
			await page
				.locator('#portals tr[data-portal="tcp0"]', {
					hasText: '\u2714 listening',
				})
				.waitFor({ timeout: WAIT });
			await lunRow(1).waitFor({ timeout: WAIT });
		},
	);

	const hellos = await page.locator('#events li[data-type="hello"]').count();
	await cmd('agent-stop');
	await step(
		'the agent stopped: a warning over the last figures, the stream reconnecting',
		async () => {
			await page
				.locator('#banner', { hasText: 'The agent is not answering' })
				.waitFor({ timeout: WAIT });
			await page
				.locator('#events-state', { hasText: 'reconnecting' })
				.waitFor({ timeout: WAIT });
			await page
				.locator('#summary', { hasText: 'agent unreachable' })
				.waitFor({ timeout: WAIT });
			// The last figures stay.
			await lunRow(1).waitFor({ timeout: WAIT });
		},
	);
	await cmd('agent-start');
	await step('after the agent restarts the page reconnects by itself', async () => {
		await page
			.locator('#events li[data-type="hello"]')
			.nth(hellos)
			.waitFor({ timeout: 2 * WAIT });
		await page.locator('#events-state', { hasText: 'live' }).waitFor({ timeout: WAIT });
		await page.locator('#banner').waitFor({ state: 'hidden', timeout: WAIT });
		await lunRow(1).waitFor({ timeout: WAIT });
		if (pageErrors.length) throw new Error('uncaught: ' + pageErrors.join(' | '));
	});

	await step('signing out shows the login box and forgets the token', async () => {
		await page.getByRole('button', { name: 'Sign out' }).click();
		await page.getByLabel('API token').waitFor({ state: 'visible', timeout: WAIT });
		const kept = await page.evaluate(() => sessionStorage.getItem('isergw.token'));
		if (kept) throw new Error('the token is still in sessionStorage');
		await page.reload();
		await page.getByLabel('API token').waitFor({ state: 'visible', timeout: WAIT });
	});

	await step(
		'a token withdrawn while signed in brings the login box back with the API error',
		async () => {
			await page.getByLabel('API token').fill(READ);
			await page.getByRole('button', { name: 'Sign in' }).click();
			await lunRow(0).waitFor({ timeout: WAIT });
			await cmd('revoke-read');
			const err = page.locator('#login-error');
			await err.waitFor({ state: 'visible', timeout: 2 * WAIT });
			const text = await err.textContent();
			if (!text.includes('a valid bearer token is required'))
				throw new Error(`login error reads "${text}"`);
			if (await page.locator('#dash').isVisible())
				throw new Error('the dashboard is still shown');
			if (await page.evaluate(() => sessionStorage.getItem('isergw.token')))
				throw new Error('the refused token is still kept');
		},
	);
} catch (e) {
	await failed('page script', e.message || e);
} finally {
	await browser.close();
}
say('END');
